"""Locust users that speak SyncLab's wire; run by ``synclab load`` (``locust -f`` this file).

Settings come from the environment ``synclab load`` sets: ``SYNCLAB_LOAD_TARGET``
(ps | coordinator), ``SYNCLAB_LOAD_ADDRESS``, ``SYNCLAB_TOKEN``,
``SYNCLAB_LOAD_KEYS``, ``SYNCLAB_LOAD_FLOATS``, ``SYNCLAB_LOAD_CHUNK_BYTES``.

:class:`ShardUser` is a worker: one long-lived ``ParameterServer.Stream``; each
task pushes a gradient of ones for the next key (GRADIENT frames) and asks for
the fresh values (PULL_REQUEST), and the request's latency is until the whole
PARAMS reply has arrived — a push/pull round trip as a worker sees it. A
refused stream (``RESOURCE_EXHAUSTED`` past the shard's stream limit) is a
failure; the user opens a new stream on its next task.
:class:`CoordinatorUser` is a node's control-plane traffic: heartbeats,
iteration reports, status reads.
"""

from __future__ import annotations

import itertools
import os
import time

import grpc
import grpc.experimental.gevent as grpc_gevent
import torch
from gevent.queue import Queue
from locust import User, constant, events, task

from synclab.load.targets import key_name, user_name, user_session
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel, open_stream
from synclab.wire.frames import Message, MessageId, chunk_frames

grpc_gevent.init_gevent()  # grpc's blocking calls yield to other greenlets

TARGET = os.environ.get("SYNCLAB_LOAD_TARGET", "ps")
ADDRESS = os.environ.get("SYNCLAB_LOAD_ADDRESS", "127.0.0.1:50061")
TOKEN = os.environ.get("SYNCLAB_TOKEN", "")
KEYS = int(os.environ.get("SYNCLAB_LOAD_KEYS", "8"))
FLOATS = int(os.environ.get("SYNCLAB_LOAD_FLOATS", str(1 << 18)))
CHUNK_BYTES = int(os.environ.get("SYNCLAB_LOAD_CHUNK_BYTES", str(1 << 20)))
REPLY_TIMEOUT_S = float(os.environ.get("SYNCLAB_LOAD_REPLY_TIMEOUT_S", "30"))

_user_index = itertools.count()
_END = object()


def _fire(user: User, name: str, t0: float, nbytes: int, exc: BaseException | None = None) -> None:
    events.request.fire(request_type="grpc", name=name, response_time=(time.perf_counter() - t0) * 1000.0,
                        response_length=nbytes, exception=exc, context={}, url=ADDRESS)


class StreamEnded(ConnectionError):
    pass


def _failure(e: BaseException) -> Exception:
    """What Locust groups failures by: the gRPC status code and its details."""
    if isinstance(e, grpc.RpcError) and hasattr(e, "code"):
        return RuntimeError(f"{e.code().name}: {e.details()}")
    return RuntimeError(str(e))


class _Stream:
    """One worker's stream: frames in through a gevent queue, replies read on demand."""

    def __init__(self, channel: grpc.Channel):
        self.outbox: Queue = Queue()
        self.replies = open_stream(channel, "ps")(iter(self.outbox.get, _END))

    def send(self, msg: Message, sender: str) -> None:
        for frame in chunk_frames(msg, sender, CHUNK_BYTES):
            self.outbox.put(frame)

    def close(self) -> None:
        self.outbox.put(_END)
        self.replies.cancel()


class ShardUser(User):
    """A worker pushing and pulling as fast as the shard answers."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.node = user_name(next(_user_index))
        self.channel = open_channel(ADDRESS, TOKEN, self.node, CHUNK_BYTES)
        self.iteration = 0
        self.grad = torch.ones(FLOATS)
        self.stream: _Stream | None = None

    def on_stop(self) -> None:
        if self.stream is not None:
            self.stream.close()
        self.channel.close()

    @task
    def push_pull(self) -> None:
        self.iteration += 1
        key = key_name(self.iteration % KEYS)
        t0 = time.perf_counter()
        try:
            if self.stream is None:
                self.stream = _Stream(self.channel)
            self.stream.send(Message(MessageId(pb.GRADIENT, key, 0, self.iteration), self.grad), self.node)
            self.stream.send(Message(MessageId(pb.PULL_REQUEST, key, 0, self.iteration)), self.node)
            got = self._await_params(key)
        except (grpc.RpcError, StreamEnded) as e:
            self.stream = None
            _fire(self, "push+pull", t0, 0, _failure(e))
            time.sleep(0.5)  # a refused stream: back off before opening another
            return
        _fire(self, "push+pull", t0, 4 * FLOATS + got)

    def _await_params(self, key: str) -> int:
        got = 0
        for frame in self.stream.replies:
            h = frame.header
            if h.kind == pb.PARAMS and h.key == key and h.iteration == self.iteration:
                got += len(frame.payload)
                if got >= h.total_bytes:
                    return got
        raise StreamEnded(f"the shard ended {self.node}'s stream before answering")


class CoordinatorUser(User):
    """A node's control-plane calls: a heartbeat, an iteration report, now and then a status read."""

    wait_time = constant(0)

    def on_start(self) -> None:
        self.rank = next(_user_index)
        self.node = user_name(self.rank)
        self.session = user_session(TOKEN, self.rank)
        self.channel = open_channel(ADDRESS, TOKEN, self.node)
        self.stub = rpc.CoordinatorStub(self.channel)
        self.iteration = 0

    def on_stop(self) -> None:
        self.channel.close()

    def _call(self, name: str, method, request) -> None:
        t0 = time.perf_counter()
        try:
            reply = method(request, timeout=REPLY_TIMEOUT_S)
        except grpc.RpcError as e:
            _fire(self, name, t0, 0, _failure(e))
            return
        _fire(self, name, t0, reply.ByteSize())

    @task(5)
    def heartbeat(self) -> None:
        self._call("Heartbeat", self.stub.Heartbeat, pb.HeartbeatRequest(node=self.node, iteration=self.iteration,
                                                                              session=self.session))

    @task(5)
    def report(self) -> None:
        self.iteration += 1
        self._call("ReportIteration", self.stub.ReportIteration,
                   pb.IterationReport(node=self.node, rank=self.rank, iteration=self.iteration, iteration_s=0.1,
                                     session=self.session))

    @task(1)
    def status(self) -> None:
        self._call("Status", self.stub.Status, pb.StatusRequest())


# ``locust -f`` runs every User class in the file unless told which: keep the one the target needs.
if TARGET == "coordinator":
    del ShardUser
else:
    del CoordinatorUser
