import threading

import pytest
import torch

from synclab.transport.scheduler import QueueClosed, SendScheduler
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId


def msg(key, n_floats, priority=0):
    return Message(MessageId(pb.GRADIENT, key), torch.zeros(n_floats), priority)


def drain(s, n):
    return [s.next_frame().header.key for _ in range(n)]


def test_fifo_ignores_priority():
    s = SendScheduler("w", "fifo", chunk_bytes=400)
    s.put(msg("low", 300, priority=9))
    s.put(msg("high", 100, priority=0))
    assert drain(s, 4) == ["low", "low", "low", "high"]


def test_priority_overtakes_at_chunk_boundary():
    s = SendScheduler("w", "priority", chunk_bytes=400)
    s.put(msg("low", 300, priority=9))      # 3 chunks
    assert drain(s, 1) == ["low"]
    s.put(msg("high", 200, priority=0))     # 2 chunks, enqueued mid-message
    assert drain(s, 4) == ["high", "high", "low", "low"]


def test_future_resolves_after_last_chunk():
    s = SendScheduler("w", "fifo", chunk_bytes=400)
    f = s.put(msg("a", 200))
    s.next_frame()
    assert not f.done()
    s.next_frame()
    assert f.done()


def test_put_blocks_when_over_capacity():
    s = SendScheduler("w", "fifo", chunk_bytes=400, capacity_bytes=1000)
    s.put(msg("a", 200))  # 800 bytes queued
    admitted = threading.Event()
    threading.Thread(target=lambda: (s.put(msg("b", 200)), admitted.set()), daemon=True).start()
    assert not admitted.wait(0.2)
    drain(s, 2)
    assert admitted.wait(5)
    assert s.queued_bytes == 800


def test_single_message_larger_than_capacity_is_admitted():
    s = SendScheduler("w", "fifo", chunk_bytes=400, capacity_bytes=100)
    s.put(msg("big", 1000))
    assert s.queued_bytes == 4000


def test_close_with_error_fails_queued_futures():
    s = SendScheduler("w", "fifo")
    f = s.put(msg("a", 10))
    s.close(RuntimeError("peer gone"))
    with pytest.raises(QueueClosed):
        f.result(timeout=1)
    with pytest.raises(QueueClosed):
        s.put(msg("b", 1))
    assert s.next_frame() is None and s.queued_bytes == 0


def test_depth_callback_reports_per_band():
    seen = []
    s = SendScheduler("w", "priority", chunk_bytes=400, on_depth=lambda band, n: seen.append((band, n)))
    s.put(msg("a", 100, priority=3))
    s.next_frame()
    assert seen == [(3, 400), (3, 0)]


def test_unknown_policy_refused():
    with pytest.raises(ValueError, match="policy"):
        SendScheduler("w", "lifo")
