"""A coordinator service in process and fake nodes that heartbeat to it (no server, no processes)."""

import threading

import pytest

from synclab.config import parse_spec
from synclab.roles.coordinator import CoordinatorService, JobState
from synclab.wire import pb


def service(tmp_path, reshape_own_link, backend="tbf", profile=None):
    job = JobState(spec=parse_spec({}), run_dir=tmp_path, job_id="t", network_backend=backend, link_rate_bps=None,
                   expected={pb.WORKER: 1, pb.PS: 1}, state="running", profile=profile, heartbeat_s=0.05)
    for name, role in (("worker0", pb.WORKER), ("ps0", pb.PS)):
        job.nodes[name] = pb.NodeInfo(name=name, role=role)
        job.sessions[name] = f"session-of-{name}"  # what Register would have handed it
    return CoordinatorService(job, reshape_own_link=reshape_own_link)


class Nodes:
    """Heartbeating fake nodes: each runs ``outcome(node, cmd)`` (None = ok, else the error) on every command."""

    def __init__(self, svc, outcome=lambda node, cmd: None, names=("worker0", "ps0")):
        self.svc, self.outcome, self.got = svc, outcome, []
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._beat, args=(n,), daemon=True) for n in names]
        for t in self._threads:
            t.start()

    def _beat(self, node):
        results = []
        while not self._stop.wait(0.02):
            reply = self.svc.Heartbeat(pb.HeartbeatRequest(node=node, results=results,
                                                                  session=self.svc.job.sessions[node]), None)
            results = []
            for cmd in reply.commands:
                self.got.append((node, cmd))
                err = self.outcome(node, cmd)
                results.append(pb.CommandResult(id=cmd.id, ok=err is None, message=err or ""))

    def stop(self):
        self._stop.set()
        for t in self._threads:
            t.join()


@pytest.fixture(name="nodes")
def nodes_fixture():
    """``nodes(svc, outcome=...)`` starts heartbeating fake nodes; they stop after the test."""
    started = []

    def start(svc, **kw):
        started.append(Nodes(svc, **kw))
        return started[-1]

    yield start
    for n in started:
        n.stop()
