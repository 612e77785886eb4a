"""The order in which a shard processes what arrived: as it comes, or highest priority first (P3 §4.2).

"The packets received at the P3Server are pushed onto a priority queue with the
priority assigned by the P3Worker as the key. A server consumer thread then
polls from this queue and processes the packet the same way as in a KVServer."
:class:`PriorityServeQueue` is that queue: complete messages wait in a heap keyed
by (priority, arrival), and one consumer at a time takes the smallest priority
number, so when several are waiting the highest-priority slice is aggregated,
updated and answered first. The consumer is whichever receiving thread finds
the queue idle, and it drains the heap before returning; a dedicated thread
would cost a thread hand-off per message (the GIL's switch interval, 5 ms,
when the receivers are busy), which measured ~0.6 s per iteration for the
~100 slices of ``smallcnn`` — more than the ordering gains. :class:`InlineServe`
is the KVServer's behaviour: each stream's reader hands its messages straight
to the shard, concurrently.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from typing import Callable

from synclab.wire.frames import Received

Handler = Callable[[Received], None]
FailureHandler = Callable[[Received, BaseException], None]

SERVE_ORDERS = ("arrival", "priority")


class InlineServe:
    """Process each message on the thread that received it."""

    def __init__(self, handle: Handler):
        self._handle = handle

    def put(self, msg: Received) -> None:
        self._handle(msg)


class PriorityServeQueue:
    """A heap of received messages, drained smallest priority number first by one thread at a time.

    A message the handler refuses goes to ``on_failure`` (the caller refuses that
    sender's stream); the queue keeps serving the others.
    """

    def __init__(self, handle: Handler, on_failure: FailureHandler):
        self._handle, self._on_failure = handle, on_failure
        self._heap: list[tuple[int, int, Received]] = []
        self._seq = itertools.count()
        self._lock = threading.Lock()
        self._draining = False

    def put(self, msg: Received) -> None:
        """Queue ``msg``; unless another thread is already draining, drain the queue on this one."""
        with self._lock:
            heapq.heappush(self._heap, (msg.priority, next(self._seq), msg))
            if self._draining:
                return
            self._draining = True
        try:
            while True:
                with self._lock:
                    if not self._heap:
                        self._draining = False
                        return
                    _, _, next_msg = heapq.heappop(self._heap)
                try:
                    self._handle(next_msg)
                except Exception as e:  # noqa: BLE001 - reported, never swallowed: the sender's stream is refused
                    self._on_failure(next_msg, e)
        except BaseException:
            with self._lock:
                self._draining = False
            raise


def make_serve_queue(order: str, handle: Handler, on_failure: FailureHandler):
    if order not in SERVE_ORDERS:
        raise ValueError(f"unknown serve order {order!r}; choose one of {SERVE_ORDERS}")
    return InlineServe(handle) if order == "arrival" else PriorityServeQueue(handle, on_failure)
