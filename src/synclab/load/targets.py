"""Standalone load targets on loopback: a PS shard and a coordinator, built from the job's own parts.

The shard target runs :class:`~synclab.ps.shard.Shard` in ``async`` mode (every
push applied on its own, MXNet's ``dist_async``) with ``lr = 1``, no momentum and
no weight decay, over ``keys`` zero-initialised tensors. Load users push
gradients of ones, so after any run every element of a key's value is exactly
``-(pushes applied to that key)`` (integers below 2**24 are exact in fp32): a
lost update or one applied twice shows as a mismatch between the values, the
shard's version counters and what the users were acknowledged.

Back-pressure comes from the stack, not from a new mechanism: the data-plane
server admits at most ``max_streams`` concurrent RPCs (more are refused with
``RESOURCE_EXHAUSTED``), each stream's reader hands a message to the shard
before it reads the next (so a busy shard stops reading and HTTP/2 flow control
stops the sender), and :class:`~synclab.wire.frames.MessageLimits` caps what one
peer may make the node hold.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import torch

from synclab.plans.sharding import Partition
from synclab.ps.serve_queue import InlineServe
from synclab.ps.shard import Shard
from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc
from synclab.wire.channels import bind, make_server
from synclab.wire.frames import MessageLimits, Received

TARGETS = ("ps", "coordinator")


def user_name(i: int) -> str:
    """The node name the i-th load user sends as (``x-synclab-node``); the shard accepts pushes from these."""
    return f"load{i}"


def user_session(token: str, i: int) -> str:
    """The session the coordinator target holds for load user ``i``, as if it had registered (a running job's
    Register hands out a random one): derived from the token, so the Locust processes know it without a call."""
    import hashlib
    import hmac

    return hmac.new(token.encode(), user_name(i).encode(), hashlib.sha256).hexdigest()[:32]


def key_name(i: int) -> str:
    return f"load.key{i}"


@dataclass(frozen=True)
class ShardCheck:
    """What a shard target holds after a run: per key, pushes applied and whether the values agree."""

    applied: dict[str, int]
    mismatched: list[str]     # keys whose values are not exactly -(pushes applied)

    @property
    def total_applied(self) -> int:
        return sum(self.applied.values())


class ShardTarget:
    """A PS shard serving the load users ``load0..load{users-1}`` on ``host:port``."""

    def __init__(self, *, users: int, keys: int = 8, floats: int = 1 << 18, token: str | None = None,
                 host: str = "127.0.0.1", port: int = 0, max_streams: int = 64, chunk_bytes: int = 1 << 20,
                 queue_bytes: int = 64 << 20):
        if users < 1 or keys < 1 or floats < 1:
            raise ValueError(f"need users, keys and floats >= 1, got {users}, {keys}, {floats}")
        self.token = token or uuid.uuid4().hex
        self.users, self.keys, self.floats = users, keys, floats
        self.workers = [user_name(i) for i in range(users)]
        parts = [Partition(key_name(k), 0, 0, floats, shard=0) for k in range(keys)]
        self.limits = MessageLimits.for_payload(4 * floats, queue_bytes)
        self.refused: list[str] = []
        self.stream_errors: list[str] = []   # streams that ended with an error other than the user leaving
        self.transport = NodeTransport("ps0", self.token, on_message=self._on_message, on_error=self._on_error,
                                       policy="priority",
                                       chunk_bytes=chunk_bytes, queue_bytes=queue_bytes, max_streams=max_streams,
                                       limits=self.limits)
        # max_ahead: a load user pushes the keys in turn and an attempt its stream lost still uses up an
        # iteration, so a key's next push may come any number of iterations after its last (ps.shard's window
        # is for training jobs; here only the order of each user's pushes is checked)
        self.shard = Shard(0, parts, self.workers, lr=1.0, momentum=0.0, weight_decay=0.0, mode="async",
                           max_ahead=1 << 40, send=lambda w, m: self.transport.reverse_link(w, 10.0).send(m))
        self._serve = InlineServe(self.shard.handle)
        for k in range(keys):
            self.shard.seed(key_name(k), 0, torch.zeros(floats))
        self.port = self.transport.serve(host, port, ps=True, pull_handler=self._pull)
        self.address = f"{host}:{self.port}"

    def _on_message(self, msg: Received) -> None:
        try:
            self._serve.put(msg)
        except ValueError as e:  # a push the shard refuses: the transport refuses that sender's stream
            self.refused.append(f"{msg.sender}: {e}")
            raise

    def _on_error(self, peer: str, err: BaseException) -> None:
        import grpc

        if isinstance(err, grpc.RpcError):
            code = getattr(err, "code", None)  # a server's request iterator raises a bare RpcError on cancel
            if code is None or code() == grpc.StatusCode.CANCELLED:
                return  # a load user stopped (or was stopped) and cancelled its stream
        self.stream_errors.append(f"{peer}: {err}")

    def _pull(self, request, context):
        yield from self.shard.pull_frames(request.key, request.slice, "ps0", self.transport.chunk_bytes)

    def check(self) -> ShardCheck:
        applied, mismatched = {}, []
        for k in range(self.keys):
            key = key_name(k)
            n = self.shard.version(key)
            applied[key] = n
            if not torch.equal(self.shard.value(key), torch.full((self.floats,), -float(n))):
                mismatched.append(key)
        return ShardCheck(applied, mismatched)

    def close(self) -> None:
        self.transport.close(grace_s=1.0)


class CoordinatorTarget:
    """The coordinator service of a job that is running (nodes never register): Status, Heartbeat and
    ReportIteration are served as in a live job, each report kept."""

    def __init__(self, *, users: int = 1, token: str | None = None, host: str = "127.0.0.1", port: int = 0,
                 max_rpcs: int = 64, run_dir: Path | None = None):
        from synclab.config.spec import Spec
        from synclab.roles.coordinator import CoordinatorService, JobState

        self.token = token or uuid.uuid4().hex
        # the load users are the job's registered workers (the coordinator answers no one else's reports), and
        # report as many iterations as a run lasts; the default strategy: the PS baseline
        spec = Spec.model_validate({"run": {"iterations": 1 << 40}})
        nodes = {user_name(i): pb.NodeInfo(role=pb.WORKER, index=i, name=user_name(i)) for i in range(users)}
        self.job = JobState(spec=spec, run_dir=run_dir or Path("."), job_id="load", network_backend="none",
                            link_rate_bps=None, expected={pb.WORKER: users, pb.PS: 0}, state="running", nodes=nodes)
        self.job.sessions = {user_name(i): user_session(self.token, i) for i in range(users)}
        self.service = CoordinatorService(self.job)
        self.server = make_server(self.token, max_rpcs)
        rpc.add_CoordinatorServicer_to_server(self.service, self.server)
        self.port = bind(self.server, f"{host}:{port}")
        if self.port == 0:
            raise OSError(f"load coordinator: cannot listen on {host}:{port}")
        self.server.start()
        self.address = f"{host}:{self.port}"

    @property
    def reports(self) -> int:
        with self.service.cv:
            return len(self.job.reports)

    def close(self) -> None:
        self.server.stop(1).wait(2)


class RssSampler:
    """Peak and last resident set size of this process, sampled every ``period_s`` (samples: unix time, bytes)."""

    def __init__(self, period_s: float = 0.2):
        import psutil

        self._proc = psutil.Process()
        self.baseline = self.peak = self.last = self._proc.memory_info().rss
        self.samples: list[tuple[float, int]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(period_s,), name="rss", daemon=True)
        self._thread.start()

    def _run(self, period_s: float) -> None:
        while not self._stop.wait(period_s):
            rss = self._proc.memory_info().rss
            self.last, self.peak = rss, max(self.peak, rss)
            self.samples.append((time.time(), rss))

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
