"""A coordinator that restarts in place (a container job resumed from its checkpoint) listens at the address
the dead attempt's nodes still call: a node that is not registered in this job is told to stop, and neither
its heartbeats nor its end count for this job."""

from synclab.config import parse_spec
from synclab.roles.coordinator import CoordinatorService, JobState
from synclab.wire import pb


def test_a_node_of_an_earlier_attempt_is_told_to_stop_and_does_not_fail_the_job(tmp_path):
    job = JobState(spec=parse_spec({}), run_dir=tmp_path, job_id="attempt2", network_backend="none",
                   link_rate_bps=None, expected={pb.WORKER: 1, pb.PS: 1})
    job.nodes["ps0"] = pb.NodeInfo(name="ps0", role=pb.PS)
    svc = CoordinatorService(job)

    stale = svc.Heartbeat(pb.HeartbeatRequest(node="worker0"), None)
    assert stale.stop and "not registered in job attempt2" in stale.reason
    svc.Done(pb.DoneRequest(node="worker0", ok=False, message="lost the coordinator"), None)
    assert job.state == "registering" and not job.failure and "worker0" not in job.done
    assert "worker0" not in job.heartbeats  # the watch never waits for it

    live = svc.Heartbeat(pb.HeartbeatRequest(node="ps0"), None)
    assert not live.stop and "ps0" in job.heartbeats
