"""`synclab shape` at the coordinator: nodes get the command at their next heartbeat, and the coordinator's
own link (a container, a netns node) is reshaped too unless a role or another node was named."""

import json

from synclab.config import parse_spec
from synclab.metrics import NodeMetrics
from synclab.roles.coordinator import CoordinatorService, JobState, own_link_reshaper
from synclab.wire import pb


def service(tmp_path, reshape_own_link):
    job = JobState(spec=parse_spec({}), run_dir=tmp_path, job_id="t", network_backend="tbf", link_rate_bps=None,
                   expected={pb.WORKER: 1, pb.PS: 1}, state="running")
    for name, role in (("worker0", pb.WORKER), ("ps0", pb.PS)):
        job.nodes[name] = pb.NodeInfo(name=name, role=role)
    return CoordinatorService(job, reshape_own_link=reshape_own_link)


def shape(svc, target=""):
    return svc.Control(pb.ControlCommand(kind="shape", target=target, args_json=json.dumps(
        {"profile": {"rate": "200mbit", "direction": "both"}})), None)


def test_shape_everything_includes_the_coordinators_own_link(tmp_path):
    own = []
    svc = service(tmp_path, own.append)
    reply = shape(svc)
    assert reply.accepted and "coordinator" in reply.message and len(own) == 1
    assert set(svc.job.commands) == {"worker0", "ps0"}
    assert (tmp_path / "network-changes.csv").read_text().splitlines()[1].endswith("ps0 worker0 coordinator")
    assert shape(svc, "coordinator").accepted and len(own) == 2


def test_shape_a_role_leaves_the_coordinator_alone(tmp_path):
    own = []
    svc = service(tmp_path, own.append)
    assert shape(svc, "worker").accepted and own == [] and set(svc.job.commands) == {"worker0"}


def test_a_coordinator_without_a_link_of_its_own(tmp_path):
    svc = service(tmp_path, None)
    reply = shape(svc)
    assert reply.accepted and "coordinator" not in reply.message
    assert not shape(svc, "coordinator").accepted
    # The transport's own shaping (app) and a shared host namespace leave nothing to reshape.
    metrics = NodeMetrics("coordinator", "coordinator")
    assert own_link_reshaper(parse_spec({"network": {"backend": "app"}}), metrics) is None
    assert own_link_reshaper(parse_spec({"network": {"backend": "tbf", "isolation": "none"}}), metrics) is None
