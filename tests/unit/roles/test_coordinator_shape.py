"""`synclab shape` at the coordinator: nodes get the command at their next heartbeat and report the outcome;
the command answers once all did. The coordinator's own link (a container, a netns node) is reshaped too unless
a role or another node was named. A change the backend cannot make is refused up front (exit 2)."""

import json
import time

import pytest

# nodes_fixture is the `nodes` fixture: imported, pytest finds it here
from support.coordinator import nodes_fixture, service  # noqa: F401
from synclab.config import parse_spec
from synclab.linkprofile import profile_from_mapping
from synclab.metrics import NodeMetrics
from synclab.netem.profile import load_profile
from synclab.netem.reshape import reshape_refusal
from synclab.roles.coordinator import own_link_reshaper
from synclab.wire import pb


def shape(svc, target="", profile=None):
    return svc.Control(pb.ControlCommand(kind="shape", target=target, args_json=json.dumps(
        {"profile": profile or {"rate": "200mbit", "direction": "both"}})), None)


def test_shape_everything_includes_the_coordinators_own_link(tmp_path, nodes):
    own = []
    svc = service(tmp_path, own.append)
    fake = nodes(svc)
    reply = shape(svc)
    assert reply.accepted and "coordinator" in reply.message and len(own) == 1
    assert {n for n, _ in fake.got} == {"worker0", "ps0"}
    assert (tmp_path / "network-changes.csv").read_text().splitlines()[1].endswith("ps0 worker0 coordinator,")
    assert shape(svc, "coordinator").accepted and len(own) == 2


def test_shape_a_role_leaves_the_coordinator_alone(tmp_path, nodes):
    own = []
    svc = service(tmp_path, own.append)
    fake = nodes(svc)
    assert shape(svc, "worker").accepted and own == [] and {n for n, _ in fake.got} == {"worker0"}


def test_a_coordinator_without_a_link_of_its_own(tmp_path, nodes):
    svc = service(tmp_path, None)
    nodes(svc)
    reply = shape(svc)
    assert reply.accepted and "coordinator" not in reply.message
    assert not shape(svc, "coordinator").accepted
    # The transport's own shaping (app) and a shared host namespace leave nothing to reshape.
    metrics = NodeMetrics("coordinator", "coordinator")
    assert own_link_reshaper(parse_spec({"network": {"backend": "app"}}), metrics) is None
    assert own_link_reshaper(parse_spec({"network": {"backend": "tbf", "isolation": "none"}}), metrics) is None


def test_a_reshape_that_fails_on_a_node_fails_the_command(tmp_path, nodes):
    svc = service(tmp_path, None)
    nodes(svc, outcome=lambda node, cmd: "RTNETLINK answers: Operation not permitted" if node == "ps0" else None)
    reply = shape(svc)
    assert not reply.accepted and not reply.unsupported
    assert "failed on 1 of 2 node(s): ps0: RTNETLINK answers: Operation not permitted" in reply.message
    assert (tmp_path / "network-changes.csv").read_text().splitlines()[1].endswith(",worker0,ps0")


def test_a_node_that_never_answers_fails_the_command(tmp_path, nodes, monkeypatch):
    import synclab.roles.coordinator

    monkeypatch.setattr(synclab.roles.coordinator, "COMMAND_ANSWER_MIN_S", 1.0)  # ten heartbeats are 0.5 s here
    svc = service(tmp_path, None)
    nodes(svc, names=("worker0",))
    t0 = time.monotonic()
    reply = shape(svc)
    assert not reply.accepted and "ps0: no answer within 1 s" in reply.message
    assert 1.0 <= time.monotonic() - t0 < 5.0
    assert svc.job.commands.get("ps0") == []  # withdrawn: it must not apply it later


@pytest.mark.parametrize("backend", ["tbf", "htb", "app"])
def test_delay_on_a_backend_without_netem_is_refused_and_nothing_queued(tmp_path, backend):
    svc = service(tmp_path, None, backend=backend, profile=load_profile("1gbit"))
    reply = shape(svc, profile=load_profile("wan-20ms").model_dump(mode="json"))
    assert not reply.accepted and reply.unsupported
    assert f"backend {backend!r} cannot change delay" in reply.message and "jitter" in reply.message
    assert svc.job.commands == {}


def test_refusal_rule():
    wan, gbit = load_profile("wan-20ms"), load_profile("1gbit")
    assert reshape_refusal("netem", gbit, wan) is None
    assert reshape_refusal("tbf", gbit, load_profile("4gbit")) is None          # rate only: tbf can
    assert reshape_refusal("app", wan, wan.model_copy(update={"rate_bps": 10**8})) is None  # delay kept as is
    assert "delay" in reshape_refusal("app", wan, gbit)                           # removing a delay is a change too
    assert "loss" in reshape_refusal("htb", gbit, load_profile("lossy-1pct"))
    assert "rate" in reshape_refusal("none", None, gbit)
    override = profile_from_mapping({"rate": "1gbit", "roles": {"ps": {"delay": "5ms"}}})
    assert "delay of ps links" in reshape_refusal("tbf", gbit, override)
    assert reshape_refusal("auto", gbit, wan) is None  # unknown here: each node checks for itself


def test_a_node_on_the_app_backend_refuses_a_delay_it_cannot_apply():
    """The node-side backstop (hand-started nodes, where the coordinator saw backend 'auto')."""
    from synclab.roles.bootstrap import reshaper
    from synclab.transport.shaper import LinkShaper

    shaper = LinkShaper(rate_bps=10**9)
    handle = reshaper(parse_spec({"network": {"backend": "app"}}), "worker", "worker0", shaper,
                      NodeMetrics("worker0", "worker"))

    def cmd(name):
        return pb.ControlCommand(kind="shape", id="x", args_json=json.dumps(
            {"profile": load_profile(name).model_dump(mode="json")}))

    with pytest.raises(RuntimeError, match="cannot change delay, jitter at run time; nothing applied"):
        handle(cmd("wan-20ms"))
    handle(cmd("4gbit"))
    assert shaper.bucket is not None and shaper.bucket.rate_Bps == pytest.approx(4e9 / 8)
