"""The P3 server's receive-side priority queue (P3 §4.2): waiting slices are processed highest priority first."""

import threading

import pytest

from synclab.ps.serve_queue import InlineServe, PriorityServeQueue, make_serve_queue
from synclab.wire import pb
from synclab.wire.frames import MessageId, Received


def msg(key, priority, sender="worker0"):
    return Received(MessageId(pb.GRADIENT, key, 0, 1), sender, priority, None)


def test_waiting_messages_are_served_smallest_priority_number_first():
    handled, gate, busy = [], threading.Event(), threading.Event()

    def handle(m):
        if m.mid.key == "first":
            busy.set()
            gate.wait()
        handled.append(m.mid.key)

    q = PriorityServeQueue(handle, on_failure=lambda m, e: None)
    drainer = threading.Thread(target=q.put, args=(msg("first", 9),))   # this receiver becomes the consumer
    drainer.start()
    busy.wait()
    for key, prio in [("last-layer", 5), ("layer-2", 2), ("layer-0", 0), ("layer-2b", 2)]:
        q.put(msg(key, prio))    # the consumer is busy: these only wait in the heap, and put returns
    assert handled == []
    gate.set()
    drainer.join()
    assert handled == ["first", "layer-0", "layer-2", "layer-2b", "last-layer"]


def test_a_refused_message_is_reported_and_the_rest_are_served():
    failures, handled = [], []

    def handle(m):
        if m.mid.key == "bad":
            raise ValueError("no such key")
        handled.append(m.mid.key)

    q = PriorityServeQueue(handle, on_failure=lambda m, e: failures.append((m.sender, str(e))))
    q.put(msg("bad", 0, sender="worker1"))
    q.put(msg("good", 1))
    assert failures == [("worker1", "no such key")] and handled == ["good"]


def test_arrival_order_handles_inline_and_lets_errors_reach_the_transport():
    handled = []
    q = make_serve_queue("arrival", lambda m: handled.append(m.mid.key), on_failure=lambda m, e: None)
    assert isinstance(q, InlineServe)
    q.put(msg("a", 5))
    q.put(msg("b", 0))
    assert handled == ["a", "b"]

    def refuse(m):
        raise ValueError("refused")

    with pytest.raises(ValueError):
        make_serve_queue("arrival", refuse, on_failure=lambda m, e: None).put(msg("a", 0))
    with pytest.raises(ValueError, match="serve order"):
        make_serve_queue("random", refuse, on_failure=lambda m, e: None)
