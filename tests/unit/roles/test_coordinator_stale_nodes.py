"""Only a node that registered, with the session its registration was given, speaks as that node.

A coordinator that restarts in place (a container job resumed from its checkpoint) listens at the address the
dead attempt's nodes still call, and a holder of the job token can claim any node's name: neither's heartbeats,
reports, barriers or end count for this job. Each is refused with PERMISSION_DENIED and changes nothing."""

import grpc
import pytest

from synclab.config import parse_spec
from synclab.roles.coordinator import CoordinatorService, JobState
from synclab.wire import pb


class Refused(Exception):
    pass


class Context:
    """The part of a gRPC servicer context the coordinator's checks use."""

    def abort(self, code, details):
        raise Refused(code, details)

    def invocation_metadata(self):
        return ()

    def peer(self):
        return "ipv4:127.0.0.1:1"


def registered(tmp_path, job_id="attempt2"):
    job = JobState(spec=parse_spec({}), run_dir=tmp_path, job_id=job_id, network_backend="none",
                   link_rate_bps=None, expected={pb.WORKER: 1, pb.PS: 1})
    svc = CoordinatorService(job)
    reply = svc.Register(pb.RegisterRequest(role=pb.PS, requested_index=0, address="127.0.0.1:1"), Context())
    return job, svc, reply.session


def refused(call, request, words):
    with pytest.raises(Refused) as e:
        call(request, Context())
    code, details = e.value.args
    assert code == grpc.StatusCode.PERMISSION_DENIED and words in details, details


def test_register_hands_each_node_its_own_secret(tmp_path):
    job, svc, session = registered(tmp_path)
    other = svc.Register(pb.RegisterRequest(role=pb.WORKER, requested_index=0, address="127.0.0.1:2"), Context())
    assert len(session) == 32 and other.session and other.session != session
    assert job.sessions == {"ps0": session, "worker0": other.session}


def test_a_node_of_an_earlier_attempt_is_refused_and_does_not_fail_the_job(tmp_path):
    job, svc, _ = registered(tmp_path)
    refused(svc.Heartbeat, pb.HeartbeatRequest(node="worker0", session="old"), "not a registered node of job attempt2")
    refused(svc.Done, pb.DoneRequest(node="worker0", ok=False, message="lost the coordinator", session="old"),
            "not a registered node")
    assert job.state == "registering" and not job.failure and "worker0" not in job.done
    assert "worker0" not in job.heartbeats  # the watch never waits for it


def test_a_registered_name_without_its_session_changes_nothing(tmp_path):
    job, svc, session = registered(tmp_path)
    job.heartbeats["ps0"] = 0.0  # long silent: only ps0 itself may revive it
    for wrong in ("", "0" * 32, session[:-1]):
        refused(svc.Heartbeat, pb.HeartbeatRequest(node="ps0", session=wrong), "without that node's session")
        refused(svc.Done, pb.DoneRequest(node="ps0", ok=False, message="spoofed", session=wrong), "session")
        refused(svc.Done, pb.DoneRequest(node="ps0", ok=True, session=wrong), "session")
        refused(svc.Barrier, pb.BarrierRequest(name="start", node="ps0", participants=2, session=wrong), "session")
    assert job.heartbeats["ps0"] == 0.0 and not job.done and not job.barriers and job.state == "registering"

    live = svc.Heartbeat(pb.HeartbeatRequest(node="ps0", session=session), Context())
    assert not live.stop and job.heartbeats["ps0"] > 0.0
