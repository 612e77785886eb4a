"""``ps``'s two protocols, on a worker with recording links (no sockets): ``kvstore`` pushes each gradient as
backward hands it over (P3 §4.1); ``push-then-pull`` (Stanza §5.2, eq. 6) pushes nothing during backward,
pushes everything at its end, pulls only once every push has left, and opens every gate together once every
tensor has landed."""

import threading
from concurrent.futures import Future

import pytest
import torch

from synclab.core import ParamInfo
from synclab.plans.sharding import Partition
from synclab.strategies import WorkerContext
from synclab.strategies.ps import ParameterServerBaseline, PsOptions
from synclab.transport.inbox import Inbox
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received

PARAMS = [ParamInfo(0, "big", (6,), 6, 0), ParamInfo(1, "small", (2,), 2, 1)]
PARTS = (Partition("big", 0, 0, 3, 0), Partition("big", 1, 3, 3, 1), Partition("small", 0, 0, 2, 1))


class HeldLink:
    """Records what is sent; each send completes only when the test releases it (a link still draining)."""

    def __init__(self, shard: int, log: list):
        self.shard, self.log, self.futures = shard, log, []

    def send(self, msg):
        self.log.append((msg.mid.kind, msg.mid.key, msg.mid.slice, msg.mid.iteration))
        self.futures.append(Future())
        return self.futures[-1]


def worker(protocol: str):
    options = PsOptions(protocol=protocol)
    plan = ParameterServerBaseline.kvstore_plan(PARAMS, 2, 0).model_copy(update={"partitions": PARTS})
    log, fresh, inbox = [], [], Inbox()
    links = {s: HeldLink(s, log) for s in (0, 1)}
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=PARAMS, tensors=[torch.zeros(6), torch.zeros(2)],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, inbox=inbox, mark_fresh=fresh.append,
                        ps_links=links, plan=plan, options=options)
    return ParameterServerBaseline(ctx), links, log, fresh, inbox


def release(links):
    """Every slice sent so far leaves (is handed to gRPC whole)."""
    for link in links.values():
        for f in link.futures:
            if not f.done():
                f.set_result(None)


def wait_for(cond, what):
    for _ in range(500):
        if cond():
            return
        threading.Event().wait(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def reply(inbox, key, slice_, iteration, shard, n):
    inbox.deliver(Received(MessageId(pb.PARAMS, key, slice_, iteration), f"ps{shard}", 0, torch.full((n,), 7.0)))


def test_plan_server_mode_follows_the_protocol():
    for protocol, mode in (("kvstore", "notify-pull"), ("push-then-pull", "pull")):
        plan = ParameterServerBaseline.make_plan(PARAMS, ps_shards=2, workers=2, seed=0,
                                                 options=PsOptions(protocol=protocol))
        assert plan.server_mode == mode
    with pytest.raises(ValueError):
        PsOptions(protocol="overlap")


def test_kvstore_pushes_each_gradient_at_once():
    s, links, log, fresh, _ = worker("kvstore")
    s.on_gradient(1, 1, torch.ones(2))
    assert log == [(pb.GRADIENT, "small", 0, 1)]
    s.on_backward_end(1)  # nothing more: the values come after the shards' notifications
    assert len(log) == 1 and fresh == []


def test_push_then_pull_orders_pushes_pulls_and_gates():
    s, links, log, fresh, inbox = worker("push-then-pull")
    s.on_gradient(3, 1, torch.ones(2))
    s.on_gradient(3, 0, torch.ones(6))
    assert log == []  # nothing moves during backward
    end = threading.Thread(target=s.on_backward_end, args=(3,), daemon=True)
    end.start()
    wait_for(lambda: len(log) == 3, "the three pushes")
    assert [e[0] for e in log] == [pb.GRADIENT] * 3
    assert [e[1] for e in log] == ["small", "big", "big"]  # in the order backward handed them over
    threading.Event().wait(0.1)
    assert len(log) == 3  # no pull while a push has not left
    release(links)
    wait_for(lambda: len(log) == 6, "the pulls")
    assert sorted(e[:3] for e in log[3:]) == [(pb.PULL_REQUEST, "big", 0), (pb.PULL_REQUEST, "big", 1),
                                             (pb.PULL_REQUEST, "small", 0)]
    assert all(e[3] == 3 for e in log)
    reply(inbox, "small", 0, 3, 1, 2)
    reply(inbox, "big", 1, 3, 1, 3)
    threading.Event().wait(0.1)
    assert fresh == [] and end.is_alive()  # one slice still out: no gate opens
    reply(inbox, "big", 0, 3, 0, 3)
    end.join(5)
    assert not end.is_alive()
    assert fresh == [0, 1]  # every gate at once, after the last tensor landed
    assert torch.equal(s.ctx.tensors[0], torch.full((6,), 7.0))


def test_push_then_pull_failed_push_raises_on_the_comm_thread():
    s, links, log, fresh, _ = worker("push-then-pull")
    s.on_gradient(1, 0, torch.ones(6))
    s.on_gradient(1, 1, torch.ones(2))
    for link in links.values():  # the transport fails every queued slice
        link.send = (lambda orig: (lambda msg: (f := orig(msg), f.set_exception(ConnectionError("down")))[0]))(
            link.send)
    with pytest.raises(ConnectionError, match="down"):
        s.on_backward_end(1)
    assert fresh == [] and all(e[0] == pb.GRADIENT for e in log)
