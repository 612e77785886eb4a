import pytest
import torch
from hypothesis import given, settings, strategies as st

from synclab.wire import pb
from synclab.wire.frames import FrameError, Message, MessageId, Reassembler, chunk_frames

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
        Reassembler(max_chunk_bytes=1 << 20, max_message_bytes=1 << 30).add(f)
    except FrameError:
        pass
