"""The order in which a shard processes what arrived: as it comes, or highest priority first (P3 §4.2).

"The packets received at the P3Server are pushed onto a priority queue with the
priority assigned by the P3Worker as the key. A server consumer thread then
polls from this queue and processes the packet the same way as in a KVServer."
:class:`PriorityServeQueue` is that queue and that thread: complete messages
wait in a heap keyed by (priority, arrival), so when several are waiting the
highest-priority slice (smallest number) is aggregated, updated and answered
first. :class:`InlineServe` is the KVServer's behaviour: each stream's reader
hands its messages straight to the shard.
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

    def close(self) -> None:
        pass


class PriorityServeQueue:
    """One consumer thread draining a heap of received messages, smallest priority number first.

    A message the handler refuses goes to ``on_failure`` (the caller refuses that
    sender's stream); the queue keeps serving the others.
    """

    def __init__(self, handle: Handler, on_failure: FailureHandler, name: str = "serve"):
        self._handle, self._on_failure = handle, on_failure
        self._heap: list[tuple[int, int, Received]] = []
        self._seq = itertools.count()
        self._cv = threading.Condition()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def put(self, msg: Received) -> None:
        with self._cv:
            heapq.heappush(self._heap, (msg.priority, next(self._seq), msg))
            self._cv.notify()

    def _run(self) -> None:
        while True:
            with self._cv:
                self._cv.wait_for(lambda: self._heap or self._closed)
                if not self._heap:
                    return
                _, _, msg = heapq.heappop(self._heap)
            try:
                self._handle(msg)
            except Exception as e:  # noqa: BLE001 - reported, never swallowed: the sender's stream is refused
                self._on_failure(msg, e)

    def close(self, timeout_s: float = 10.0) -> None:
        """Process what is queued, then stop the thread."""
        with self._cv:
            self._closed = True
            self._cv.notify()
        self._thread.join(timeout_s)


def make_serve_queue(order: str, handle: Handler, on_failure: FailureHandler):
    if order not in SERVE_ORDERS:
        raise ValueError(f"unknown serve order {order!r}; choose one of {SERVE_ORDERS}")
    return InlineServe(handle) if order == "arrival" else PriorityServeQueue(handle, on_failure)
