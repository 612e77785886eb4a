"""The KVStore worker's pull rule (P3 §4.2): "MXNet only issues a pull request once it has received the update
notification for all the slices of a layer" — a key split over shards is pulled once every slice is notified."""

from concurrent.futures import Future

import torch

from synclab.core import ParamInfo
from synclab.plans.sharding import Partition
from synclab.strategies import WorkerContext
from synclab.strategies.ps import PsClient
from synclab.transport.inbox import Inbox
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received


class RecordingLink:
    def __init__(self, shard: int, log: list):
        self.shard, self.log = shard, log

    def send(self, msg):
        self.log.append((self.shard, msg.mid.kind, msg.mid.key, msg.mid.slice, msg.mid.iteration))
        done = Future()
        done.set_result(None)
        return done


def client():
    params = [ParamInfo(0, "big", (6,), 6, 0), ParamInfo(1, "small", (2,), 2, 1)]
    parts = [Partition("big", 0, 0, 3, 0), Partition("big", 1, 3, 3, 1), Partition("small", 0, 0, 2, 1)]
    log, inbox = [], Inbox()
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=params, tensors=[torch.zeros(6), torch.zeros(2)],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, inbox=inbox, mark_fresh=lambda i: None,
                        ps_links={s: RecordingLink(s, log) for s in (0, 1)})
    PsClient(ctx, parts, pull_on_notify=True)
    return inbox, log


def notify(inbox, key, slice_, iteration, shard):
    inbox.deliver(Received(MessageId(pb.NOTIFY, key, slice_, iteration), f"ps{shard}", 0, None))


def test_a_split_key_is_pulled_once_all_of_its_slices_are_notified():
    inbox, log = client()
    notify(inbox, "big", 1, 3, shard=1)
    assert log == []  # one of two slices: no pull yet
    notify(inbox, "big", 0, 3, shard=0)
    assert sorted(log) == [(0, pb.PULL_REQUEST, "big", 0, 3), (1, pb.PULL_REQUEST, "big", 1, 3)]


def test_a_single_slice_key_is_pulled_at_once_and_iterations_are_counted_apart():
    inbox, log = client()
    notify(inbox, "small", 0, 3, shard=1)
    assert log == [(1, pb.PULL_REQUEST, "small", 0, 3)]
    notify(inbox, "big", 0, 3, shard=0)
    notify(inbox, "big", 1, 4, shard=1)  # another iteration's slice does not complete iteration 3
    assert len(log) == 1


class HeldLink:
    """A link whose sends complete only when the test says so (a shaped link still draining its queue)."""

    def __init__(self):
        self.futures = []

    def send(self, msg):
        self.futures.append(Future())
        return self.futures[-1]


def test_wait_pushed_returns_once_every_pushed_slice_is_handed_over_and_times_out_naming_the_rest():
    import threading

    import pytest

    params = [ParamInfo(0, "big", (6,), 6, 0), ParamInfo(1, "small", (2,), 2, 1)]
    parts = [Partition("big", 0, 0, 3, 0), Partition("big", 1, 3, 3, 1), Partition("small", 0, 0, 2, 1)]
    links = {0: HeldLink(), 1: HeldLink()}
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=params, tensors=[torch.zeros(6), torch.zeros(2)],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, inbox=Inbox(), mark_fresh=lambda i: None,
                        ps_links=links)
    c = PsClient(ctx, parts, pull_on_notify=False)
    c.push(5, 0, torch.ones(6))
    c.push(5, 1, torch.ones(2))
    held = links[0].futures + links[1].futures
    assert len(held) == 3
    with pytest.raises(TimeoutError, match="3 gradient slice"):
        c.wait_pushed(0.05)
    for f in held[:2]:
        f.set_result(None)
    threading.Timer(0.05, held[2].set_result, args=(None,)).start()
    c.wait_pushed(5.0)  # returns once the last one is out
    c.wait_pushed(0.0)  # nothing pending: at once


def test_a_pulled_reply_streams_into_the_parameters_and_an_unasked_one_is_copied_whole():
    """With the shards' names known, the pull names each slice's destination first: the reply's chunks go
    into the live tensor as they arrive (a real Reassembler, nothing staged) and the tensor is marked fresh
    once both slices are in; a broadcast nobody asked for still lands whole through the callback."""
    from synclab.wire.frames import CONSUMED, Message, Reassembler, chunk_frames

    params = [ParamInfo(0, "big", (64,), 64, 0), ParamInfo(1, "small", (2,), 2, 1)]
    parts = [Partition("big", 0, 0, 32, 0), Partition("big", 1, 32, 32, 1), Partition("small", 0, 0, 2, 1)]
    log, inbox, fresh = [], Inbox(), []
    big = torch.nn.Parameter(torch.zeros(64))
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=params, tensors=[big, torch.zeros(2)],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, inbox=inbox, mark_fresh=fresh.append,
                        ps_links={s: RecordingLink(s, log) for s in (0, 1)}, ps_names={0: "ps0", 1: "ps1"})
    client = PsClient(ctx, parts, pull_on_notify=True)
    done = client.pull(5, 0)
    assert sorted(log) == [(0, pb.PULL_REQUEST, "big", 0, 5), (1, pb.PULL_REQUEST, "big", 1, 5)]
    values = torch.arange(64, dtype=torch.float32)
    for shard in (0, 1):
        reasm = Reassembler(max_chunk_bytes=32, sinks=inbox, peer=f"ps{shard}")
        mid = MessageId(pb.PARAMS, "big", shard, 5)
        frames = list(chunk_frames(Message(mid, values[32 * shard:32 * (shard + 1)].clone()), f"ps{shard}", 32))
        assert len(frames) == 4
        for f in frames:
            assert reasm.add(f) in (None, CONSUMED) and reasm.staged_bytes == 0
        assert torch.equal(big.detach()[32 * shard:32 * (shard + 1)], values[32 * shard:32 * (shard + 1)])
        assert done.done() == (shard == 1) and fresh == ([0] if shard == 1 else [])
    assert done.result(0) is None and big.requires_grad
    inbox.deliver(Received(MessageId(pb.PARAMS, "small", 0, 5), "ps1", 0, torch.tensor([7.0, 8.0])))
    assert torch.equal(ctx.tensors[1], torch.tensor([7.0, 8.0])) and fresh == [0, 1]


def test_a_stream_that_breaks_fails_the_pull_with_the_reason():
    params = [ParamInfo(0, "big", (6,), 6, 0)]
    inbox = Inbox()
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=params, tensors=[torch.zeros(6)],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, inbox=inbox, mark_fresh=lambda i: None,
                        ps_links={0: RecordingLink(0, [])}, ps_names={0: "ps0"})
    done = PsClient(ctx, [Partition("big", 0, 0, 6, 0)]).pull(1, 0)
    inbox.fail(ConnectionError("ps0 went away"))
    assert isinstance(done.exception(0), ConnectionError)
