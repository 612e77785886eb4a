import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from synclab.wire import pb
from synclab.wire.frames import FrameError, Message, MessageId, MessageLimits, Reassembler, chunk_frames

DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.float64, torch.int64, torch.int32, torch.uint8]


def roundtrip(tensor, chunk_bytes):
    reasm = Reassembler(max_chunk_bytes=chunk_bytes)
    frames = list(chunk_frames(Message(MessageId(pb.GRADIENT, "k", 2, 7), tensor), "w0", chunk_bytes))
    out = [reasm.add(f) for f in frames]
    assert all(o is None for o in out[:-1])
    assert reasm.pending == 0
    return frames, out[-1]


@pytest.mark.parametrize("dtype", DTYPES)
def test_roundtrip_every_dtype_multi_chunk(dtype):
    t = (torch.arange(5000) % 251).to(dtype).reshape(50, 100)
    frames, got = roundtrip(t, chunk_bytes=1024)
    assert len(frames) > 1
    assert got.tensor.dtype == dtype and got.tensor.shape == t.shape
    assert torch.equal(got.tensor, t)
    assert (got.mid, got.sender) == (MessageId(pb.GRADIENT, "k", 2, 7), "w0")


def test_payload_is_raw_little_endian_bytes():
    t = torch.tensor([1.0, -2.0], dtype=torch.float32)
    (frame,) = chunk_frames(Message(MessageId(pb.PARAMS, "x"), t), "ps0")
    assert frame.payload == b"\x00\x00\x80\x3f\x00\x00\x00\xc0"
    assert list(frame.header.shape) == [2] and frame.header.total_bytes == 8


def test_empty_tensor_and_headerless_message():
    _, got = roundtrip(torch.empty(0), 1024)
    assert got.tensor.numel() == 0
    (f,) = chunk_frames(Message(MessageId(pb.NOTIFY, "k")), "ps0")
    assert Reassembler().add(f).tensor is None


def test_oversized_chunk_refused():
    frames = list(chunk_frames(Message(MessageId(pb.GRADIENT, "k"), torch.zeros(1000)), "w", 4000))
    with pytest.raises(FrameError, match="exceeds"):
        Reassembler(max_chunk_bytes=1000).add(frames[0])


def test_inconsistent_shape_refused():
    (f,) = chunk_frames(Message(MessageId(pb.GRADIENT, "k"), torch.zeros(10)), "w")
    f.header.shape[:] = [11]
    with pytest.raises(FrameError, match="needs 44 bytes"):
        Reassembler().add(f)


def test_out_of_order_chunk_refused():
    frames = list(chunk_frames(Message(MessageId(pb.GRADIENT, "k"), torch.zeros(1000)), "w", 1000))
    r = Reassembler(max_chunk_bytes=1000)
    r.add(frames[0])
    with pytest.raises(FrameError, match="offset"):
        r.add(frames[2])


def test_unknown_dtype_refused():
    (f,) = chunk_frames(Message(MessageId(pb.GRADIENT, "k"), torch.zeros(4)), "w")
    f.header.dtype = 99
    with pytest.raises(FrameError, match="dtype"):
        Reassembler().add(f)


@settings(max_examples=200, deadline=None)
@given(kind=st.integers(0, 9), offset=st.integers(0, 1 << 40), total=st.integers(0, 1 << 40),
       dtype=st.integers(0, 9), shape=st.lists(st.integers(-3, 1 << 20), max_size=4),
       payload=st.binary(max_size=64))
def test_malformed_frames_raise_frame_error_only(kind, offset, total, dtype, shape, payload):
    """Garbage headers are refused with FrameError (-> INVALID_ARGUMENT), never another exception."""
    f = pb.Frame(header=pb.FrameHeader(kind=kind, key="k", offset=offset, total_bytes=total, dtype=dtype,
                                       shape=shape), payload=payload)
    try:
        Reassembler(max_chunk_bytes=1 << 20, limits=MessageLimits(1 << 30, 1 << 31)).add(f)
    except FrameError:
        pass


def _first_chunk(key: str, total_bytes: int, payload: bytes = b"\0" * 1024) -> pb.Frame:
    return pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key=key, offset=0, total_bytes=total_bytes,
                                          dtype=pb.UINT8, shape=[total_bytes], sender="w1"), payload=payload)


def test_header_announcing_8_gib_is_refused_before_any_allocation():
    """A peer's header cannot make the receiver allocate what it announces: refused, nothing staged."""
    import tracemalloc

    r = Reassembler(limits=MessageLimits.for_payload(1 << 20, 4 << 20), peer="w1")
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        with pytest.raises(FrameError, match=r"w1 announced .* 8589934592 bytes; this node accepts at most"):
            r.add(_first_chunk("big", 8 << 30))
        grown = tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()
    assert grown < 1 << 20  # peak: the error message, not a buffer
    assert r.pending == 0 and r.staged_bytes == 0


def test_unfinished_messages_are_capped_per_peer():
    """Messages begun but never finished stage at most max_peer_bytes; the next one is refused."""
    limits = MessageLimits(max_message_bytes=1 << 20, max_peer_bytes=3 << 20)
    r = Reassembler(limits=limits, peer="w1")
    for i in range(2):
        assert r.add(_first_chunk(f"m{i}", 1 << 20)) is None
    assert r.pending == 2 and r.staged_bytes > 2 << 20
    with pytest.raises(FrameError, match=r"w1 has 2 unfinished messages .* per-peer limit"):
        r.add(_first_chunk("m2", 1 << 20))
    assert r.pending == 2


def test_finished_messages_release_their_share_of_the_peer_cap():
    limits = MessageLimits(max_message_bytes=4096, max_peer_bytes=8192)
    r = Reassembler(max_chunk_bytes=1024, limits=limits)
    for it in range(20):  # 20 x 4 KiB through a cap of 8 KiB: fine, one at a time
        msg = Message(MessageId(pb.COLLECTIVE, "k", 0, it), torch.arange(1024, dtype=torch.float32))
        out = [r.add(f) for f in chunk_frames(msg, "w1", chunk_bytes=1024)]
        assert out[-1] is not None and torch.equal(out[-1].tensor, msg.tensor)
    assert r.staged_bytes == 0


def test_first_chunk_larger_than_its_message_is_refused_before_staging():
    r = Reassembler(limits=MessageLimits(1 << 20, 2 << 20))
    with pytest.raises(FrameError, match="overruns"):
        r.add(_first_chunk("k", 16, payload=b"\0" * 32))
    assert r.staged_bytes == 0


def test_limits_follow_the_largest_payload_with_margin():
    small = MessageLimits.for_payload(1000, queue_bytes=1 << 20)
    assert small.max_message_bytes == 1000 + (64 << 10)  # the 64 KiB floor of the margin
    big = MessageLimits.for_payload(80 << 20, queue_bytes=64 << 20)
    assert big.max_message_bytes == 90 << 20  # + 1/8
    assert big.max_peer_bytes == 2 * (90 << 20) + (64 << 20)
    with pytest.raises(ValueError):
        MessageLimits(max_message_bytes=10, max_peer_bytes=5)


def test_shared_limits_tighten_a_live_reassembler():
    limits = MessageLimits()
    r = Reassembler(limits=limits)
    limits.update(MessageLimits(1024, 4096))
    with pytest.raises(FrameError, match="at most 1024 bytes"):
        r.add(_first_chunk("k", 2048))
