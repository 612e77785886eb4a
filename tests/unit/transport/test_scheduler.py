import threading

import pytest
import torch

from synclab.transport.scheduler import QueueClosed, SchedulerGroup, SendScheduler
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


# -- one priority order per node (P3 §4.2: one consumer takes the most urgent slice, whatever its server) --------


def take_logged(s, log, name):
    """Take one chunk, logging it from ``on_take`` -- under the node's lock, so the log has the true hand-out order."""
    s.next_frame(on_take=lambda _n: log.append(name))


def consume_in_thread(s, n, log, name):
    def run():
        for _ in range(n):
            take_logged(s, log, name)
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_a_less_urgent_link_waits_while_another_link_of_the_node_has_a_more_urgent_head():
    group = SchedulerGroup()
    to_a = SendScheduler("w", "priority", chunk_bytes=400, group=group)
    to_b = SendScheduler("w", "priority", chunk_bytes=400, group=group)
    to_b.put(msg("bulk", 300, priority=9))   # 3 chunks to shard B
    to_a.put(msg("urgent", 200, priority=0))  # 2 chunks to shard A
    log: list = []
    b = consume_in_thread(to_b, 3, log, "b")
    b.join(0.2)
    assert b.is_alive() and log == []  # B's consumer is held back: A has the most urgent head
    for _ in range(2):
        take_logged(to_a, log, "a")
    b.join(5)
    assert log == ["a", "a", "b", "b", "b"]


def test_equal_priorities_on_two_links_do_not_wait_for_each_other():
    group = SchedulerGroup()
    to_a, to_b = (SendScheduler("w", "priority", chunk_bytes=400, group=group) for _ in range(2))
    to_a.put(msg("x", 200, priority=3))
    to_b.put(msg("y", 200, priority=3))
    assert drain(to_b, 2) == ["y", "y"] and drain(to_a, 2) == ["x", "x"]


def test_fifo_links_of_one_node_are_independent():
    group = SchedulerGroup()
    to_a, to_b = (SendScheduler("w", "fifo", chunk_bytes=400, group=group) for _ in range(2))
    to_a.put(msg("x", 100, priority=0))
    to_b.put(msg("y", 100, priority=9))
    assert drain(to_b, 1) == ["y"]  # FIFO ignores priority, also across links


def test_a_failed_or_drained_link_stops_holding_the_others_back():
    group = SchedulerGroup()
    to_a, to_b, to_c = (SendScheduler("w", "priority", chunk_bytes=400, group=group) for _ in range(3))
    to_a.put(msg("urgent", 100, priority=0))
    to_c.put(msg("urgent", 100, priority=0))
    to_b.put(msg("bulk", 100, priority=9))
    to_a.close(ConnectionError("shard A went away"))  # dropped: its head no longer counts
    to_c.close()                                        # closed but not drained: its head still counts
    log: list = []
    b = consume_in_thread(to_b, 1, log, "b")
    b.join(0.2)
    assert log == []
    assert drain(to_c, 1) == ["urgent"] and to_c.next_frame() is None
    b.join(5)
    assert log == ["b"] and to_a not in group.members and to_c not in group.members
