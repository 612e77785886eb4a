"""Pushes summed into their round as their chunks arrive (Shard.claim_sink through a real Reassembler)."""

import pytest
import torch

from synclab.plans.sharding import Partition
from synclab.ps.shard import PushRejected, Shard
from synclab.wire import pb
from synclab.wire.frames import CONSUMED, FrameError, Message, MessageId, Reassembler, Received, chunk_frames

N = 40  # floats in "w": 160 bytes, three 64-byte chunks
WORKERS = ["worker0", "worker1", "worker2"]


def make_shard(mode="notify-pull", max_ahead=1):
    sent = []
    s = Shard(0, [Partition("w", 0, 0, N, 0)], WORKERS, lr=0.1, momentum=0.9, weight_decay=0.01,
              send=lambda w, m: sent.append((w, m)), mode=mode, max_ahead=max_ahead)
    s.handle(Received(MessageId(pb.PARAMS, "w", 0, 0), "worker0", 0, torch.linspace(-1, 1, N)))
    return s, sent


def gradient(worker: int, it: int) -> torch.Tensor:
    return torch.randn(N, generator=torch.Generator().manual_seed(100 * it + worker))


def frames(worker: int, it: int, tensor=None):
    t = gradient(worker, it) if tensor is None else tensor
    return list(chunk_frames(Message(MessageId(pb.GRADIENT, "w", 0, it), t), WORKERS[worker], 64))


def feed(s: Shard, reasm: Reassembler, frame):
    """What a shard's stream reader does with one frame: a finished message goes to the shard."""
    msg = reasm.add(frame)
    if msg is not None and msg is not CONSUMED:
        s.handle(msg)
    return msg


def stream_pushes(s: Shard, workers, it: int = 1) -> None:
    """Each of ``workers`` streams its whole push of iteration ``it`` on its own stream."""
    for w in workers:
        reasm = Reassembler(max_chunk_bytes=64, sinks=s, peer=WORKERS[w])
        for f in frames(w, it):
            feed(s, reasm, f)


def whole_reference(iterations=2):
    s, _ = make_shard()
    for it in range(1, iterations + 1):
        for w in range(len(WORKERS)):
            s.handle(Received(MessageId(pb.GRADIENT, "w", 0, it), WORKERS[w], 0, gradient(w, it)))
    return s


def test_interleaved_streamed_pushes_match_whole_ones_and_stage_nothing():
    s, sent = make_shard()
    readers = [Reassembler(max_chunk_bytes=64, sinks=s, peer=w) for w in WORKERS]
    for it in (1, 2):
        streams = [frames(w, it) for w in range(len(WORKERS))]
        assert all(len(f) == 3 for f in streams)
        for i in range(3):  # chunk i of every worker, then chunk i + 1: the sums interleave
            for w, reasm in enumerate(readers):
                msg = feed(s, reasm, streams[w][i])
                assert reasm.staged_bytes == 0
                if i < 2:
                    assert msg is None
                else:
                    assert msg.tensor is None and msg.mid.kind == pb.GRADIENT
        assert s.version("w") == it
    assert torch.allclose(s.value("w"), whole_reference().value("w"), atol=1e-6)
    assert sum(m.mid.kind == pb.NOTIFY for _, m in sent) == 2 * len(WORKERS)


def test_a_push_staged_before_the_shard_could_claim_it_joins_the_streamed_ones():
    s, _ = make_shard()
    early = Reassembler(max_chunk_bytes=64, sinks=None, peer="worker0")  # as before the plan made the shard
    for f in frames(0, 1):
        feed(s, early, f)
    stream_pushes(s, (1, 2))
    assert s.version("w") == 1
    assert torch.allclose(s.value("w"), whole_reference(1).value("w"), atol=1e-6)


def test_a_second_push_while_the_first_streams_is_staged_and_refused_as_a_duplicate():
    s, _ = make_shard()
    first, second = (Reassembler(max_chunk_bytes=64, sinks=s, peer="worker0") for _ in range(2))
    f = frames(0, 1)
    feed(s, first, f[0])
    for g in frames(0, 1)[:-1]:
        assert feed(s, second, g) is None
    assert second.staged_bytes > 0  # not claimed: the shard knows this push would be refused
    with pytest.raises(PushRejected, match="twice"):
        feed(s, second, frames(0, 1)[-1])
    for g in f[1:]:
        feed(s, first, g)
    assert s.version("w") == 0


def test_a_push_of_the_wrong_size_gives_its_claim_back_and_the_round_still_completes():
    s, _ = make_shard()
    bad = Reassembler(max_chunk_bytes=64, sinks=s, peer="worker0")
    with pytest.raises(FrameError, match="do not fit"):
        feed(s, bad, frames(0, 1, torch.ones(N + 1))[0])
    assert s.keys() == [("w", 0)] and not s._entries[("w", 0)].rounds
    stream_pushes(s, range(len(WORKERS)))
    assert s.version("w") == 1
    assert torch.allclose(s.value("w"), whole_reference(1).value("w"), atol=1e-6)


def test_a_stream_broken_midway_never_applies_its_partial_sum():
    s, _ = make_shard()
    before = s.value("w")
    cut = Reassembler(max_chunk_bytes=64, sinks=s, peer="worker0")
    f = frames(0, 1)
    feed(s, cut, f[0])
    with pytest.raises(FrameError, match="offset"):
        feed(s, cut, f[2])  # chunk 2 before chunk 1: the stream is refused
    stream_pushes(s, (1, 2))
    assert s.version("w") == 0 and torch.equal(s.value("w"), before)
    with pytest.raises(RuntimeError, match="in flight"):
        s.state_dict()


def test_an_empty_frame_naming_a_message_still_streaming_is_refused():
    s, _ = make_shard()
    reasm = Reassembler(max_chunk_bytes=64, sinks=s, peer="worker0")
    feed(s, reasm, frames(0, 1)[0])
    empty = pb.Frame(header=pb.FrameHeader(kind=pb.GRADIENT, key="w", slice=0, iteration=1, sender="worker0"))
    with pytest.raises(FrameError, match="empty"):
        feed(s, reasm, empty)
    assert s.version("w") == 0


@pytest.mark.parametrize("mid,sender", [
    (MessageId(pb.GRADIENT, "w", 0, 1), "stranger"),            # not a worker
    (MessageId(pb.GRADIENT, "nope", 0, 1), "worker0"),          # not held here
    (MessageId(pb.GRADIENT, "w", 0, 2), "worker0"),             # outside the window
    (MessageId(pb.PARAMS, "w", 0, 0), "worker0"),               # not a push
])
def test_what_would_be_refused_is_not_claimed(mid, sender):
    s, _ = make_shard()
    assert s.claim_sink(sender, mid) is None
    assert not s._entries[("w", 0)].rounds


def test_async_mode_stages_every_push():
    s, _ = make_shard("async")
    assert s.claim_sink("worker0", MessageId(pb.GRADIENT, "w", 0, 1)) is None
