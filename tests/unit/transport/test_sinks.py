"""Chunks streamed into a named destination (Inbox.expect_into, TensorSink, Reassembler with sinks)."""

import pytest
import torch

from synclab.transport.inbox import Inbox, TensorSink
from synclab.wire import pb
from synclab.wire.frames import CONSUMED, FrameError, Message, MessageId, Reassembler, chunk_frames

MID = MessageId(pb.COLLECTIVE, "g", 1, 2, 3)


def frames_of(t: torch.Tensor, chunk_bytes: int = 64, mid: MessageId = MID):
    return list(chunk_frames(Message(mid, t), "w0", chunk_bytes))


def test_chunks_are_added_into_place_without_staging():
    inbox = Inbox()
    dst = torch.arange(100, dtype=torch.float32)
    src = torch.randn(40)
    fut = inbox.expect_into("w0", MID, TensorSink(dst[30:70], reduce=True))
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    frames = frames_of(src)
    assert len(frames) == 3
    for f in frames[:-1]:
        assert reasm.add(f) is None
        assert reasm.staged_bytes == 0 and not fut.done()
    assert reasm.add(frames[-1]) is CONSUMED
    assert fut.result(0).mid == MID and reasm.pending == 0
    expected = torch.arange(100, dtype=torch.float32)
    expected[30:70] += src
    assert torch.equal(dst, expected)
    assert not inbox._sinks  # the entry is gone once done


def test_copy_sink_overwrites_and_waits_for_the_send_still_reading_it():
    from concurrent.futures import Future

    inbox, sent = Inbox(), Future()
    dst = torch.zeros(16)
    src = torch.randn(16)
    fut = inbox.expect_into("w0", MID, TensorSink(dst, reduce=False, before=sent))
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    import threading

    t = threading.Thread(target=lambda: [reasm.add(f) for f in frames_of(src)])
    t.start()
    t.join(0.2)
    assert t.is_alive() and torch.equal(dst, torch.zeros(16))  # blocked until the send has read ``dst``
    sent.set_result(None)
    t.join(5)
    assert fut.result(0) is not None and torch.equal(dst, src)


def test_a_message_that_came_first_is_applied_whole_when_its_sink_is_named():
    inbox = Inbox()
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    src = torch.randn(40)
    msg = None
    for f in frames_of(src):
        msg = reasm.add(f) or msg
    inbox.deliver(msg)
    assert inbox.early_bytes("w0") > 0
    dst = torch.ones(40)
    fut = inbox.expect_into("w0", MID, TensorSink(dst, reduce=True))
    assert fut.done() and torch.equal(dst, src + 1) and inbox.early_bytes("w0") == 0


def test_a_sink_named_mid_message_gets_the_staged_message_whole():
    inbox = Inbox()
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    src = torch.randn(40)
    frames = frames_of(src)
    assert reasm.add(frames[0]) is None and reasm.staged_bytes > 0  # nobody waits yet: staged
    dst = torch.zeros(40)
    fut = inbox.expect_into("w0", MID, TensorSink(dst, reduce=True))
    msg = None
    for f in frames[1:]:
        msg = reasm.add(f) or msg
    assert msg is not CONSUMED and not fut.done()
    inbox.deliver(msg)
    assert fut.done() and torch.equal(dst, src)


@pytest.mark.parametrize("dtype,numel", [(torch.float64, 40), (torch.float32, 41)])
def test_a_message_that_does_not_fit_its_sink_is_refused(dtype, numel):
    inbox = Inbox()
    dst = torch.zeros(40)
    fut = inbox.expect_into("w0", MID, TensorSink(dst, reduce=True))
    reasm = Reassembler(max_chunk_bytes=1 << 20, sinks=inbox)
    with pytest.raises(FrameError, match="do not fit"):
        reasm.add(frames_of(torch.ones(numel, dtype=dtype), 1 << 20)[0])
    with pytest.raises(FrameError):
        fut.result(0)
    assert torch.equal(dst, torch.zeros(40))


def test_out_of_order_chunk_into_a_sink_is_refused():
    inbox = Inbox()
    fut = inbox.expect_into("w0", MID, TensorSink(torch.zeros(40), reduce=True))
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    frames = frames_of(torch.ones(40))
    reasm.add(frames[0])
    with pytest.raises(FrameError, match="expected 64"):
        reasm.add(frames[2])
    with pytest.raises(FrameError):
        fut.result(0)


def test_a_cancelled_sink_drops_the_rest_of_its_bytes():
    inbox = Inbox()
    dst = torch.zeros(40)
    fut = inbox.expect_into("w0", MID, TensorSink(dst, reduce=True))
    reasm = Reassembler(max_chunk_bytes=64, sinks=inbox)
    frames = frames_of(torch.ones(40))
    reasm.add(frames[0])
    assert fut.cancel()
    for f in frames[1:]:
        reasm.add(f)
    assert float(dst.sum()) == 16.0  # only the first 64 bytes, written before the reader gave up
    assert reasm.pending == 0


def test_expecting_twice_and_failing_pending_sinks():
    inbox = Inbox()
    fut = inbox.expect_into("w0", MID, TensorSink(torch.zeros(4), reduce=True))
    with pytest.raises(RuntimeError, match="already expected"):
        inbox.expect(("w0"), MID)
    inbox.fail(ConnectionError("gone"))
    with pytest.raises(ConnectionError):
        fut.result(0)


def test_a_destination_must_be_contiguous():
    with pytest.raises(ValueError, match="contiguous"):
        TensorSink(torch.zeros(4, 4).t(), reduce=True)
