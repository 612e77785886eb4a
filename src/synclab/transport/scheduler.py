"""Send scheduling: a queue per destination, one priority order per node.

Messages are cut into chunks lazily, when they reach the head, so a
higher-priority message enqueued later overtakes a lower-priority one at the
next chunk boundary (P3 §4.2); with the FIFO policy priorities are ignored.
``put`` blocks while the queued bytes exceed ``capacity_bytes`` (one message is
always admitted), so memory stays bounded when a link is slow.

The queues of one node form a :class:`SchedulerGroup`: a link may hand its next
chunk to gRPC only when no other link of the node has a more urgent message at
its head. P3 §4.2 has a single consumer thread per worker that "continuously
polls the highest priority slice from the queue", whatever the slice's server;
without the group a priority-0 slice to shard A would share the node's egress
with priority-9 slices to shard B. Equal priorities (and FIFO, where every
priority is 0) do not wait for each other.
"""

from __future__ import annotations

import heapq
import itertools
import threading
from concurrent.futures import Future
from typing import Callable, Iterator

from synclab.wire import pb
from synclab.wire.frames import Message, chunk_frames

POLICIES = ("fifo", "priority")


class QueueClosed(RuntimeError):
    """The link was closed; the message was not sent."""


class _Entry:
    __slots__ = ("msg", "frames", "future", "remaining")

    def __init__(self, msg: Message, frames: Iterator[pb.Frame], future: Future):
        self.msg, self.frames, self.future = msg, frames, future
        self.remaining = msg.nbytes


class SchedulerGroup:
    """The send queues of one node: one lock, and the rule that the most urgent head goes first."""

    def __init__(self):
        self.cv = threading.Condition()
        self.members: list[SendScheduler] = []

    def most_urgent(self) -> int | None:
        """The smallest priority at the head of any member's queue (call with ``cv`` held)."""
        heads = [m._heap[0][0] for m in self.members if m._heap]
        return min(heads) if heads else None


class SendScheduler:
    def __init__(self, sender: str, policy: str = "fifo", chunk_bytes: int = 1 << 20,
                 capacity_bytes: int = 64 << 20, on_depth: Callable[[int, int], None] | None = None,
                 group: SchedulerGroup | None = None):
        if policy not in POLICIES:
            raise ValueError(f"unknown send policy {policy!r}; choose one of {POLICIES}")
        self.sender, self.policy, self.chunk_bytes, self.capacity_bytes = sender, policy, chunk_bytes, capacity_bytes
        self._heap: list[tuple[int, int, _Entry]] = []
        self._seq = itertools.count()
        self._group = group or SchedulerGroup()
        self._cv = self._group.cv
        with self._cv:
            self._group.members.append(self)
        self._queued_bytes = 0
        self._band_bytes: dict[int, int] = {}
        self._closed = False
        self._error: BaseException | None = None
        self._on_depth = on_depth

    def put(self, msg: Message) -> Future:
        """Enqueue ``msg``; the returned future resolves when its last chunk is handed to gRPC."""
        fut: Future = Future()
        with self._cv:
            while not self._closed and self._queued_bytes and self._queued_bytes + msg.nbytes > self.capacity_bytes:
                self._cv.wait()
            if self._closed:
                raise QueueClosed(f"link from {self.sender} is closed") from self._error
            prio = msg.priority if self.policy == "priority" else 0
            heapq.heappush(self._heap, (prio, next(self._seq), _Entry(msg, chunk_frames(msg, self.sender, self.chunk_bytes), fut)))
            self._account(prio, msg.nbytes)
            self._cv.notify_all()
        return fut

    def _account(self, band: int, delta: int) -> None:
        self._queued_bytes += delta
        self._band_bytes[band] = self._band_bytes.get(band, 0) + delta
        if self._on_depth is not None:
            self._on_depth(band, self._band_bytes[band])

    def next_frame(self, on_take: Callable[[int], None] | None = None) -> pb.Frame | None:
        """Block for the next chunk to send; None once closed and drained.

        ``on_take(payload_bytes)`` runs under the node's scheduler lock as the chunk is taken (the link
        reserves its pacing slot there, so chunks are paced in the order the scheduler hands them out).
        """
        with self._cv:
            while not (self._heap and self._heap[0][0] <= self._group.most_urgent()) and not (
                    self._closed and not self._heap):
                self._cv.wait()
            if not self._heap:
                return None
            prio, _, entry = self._heap[0]
            frame = next(entry.frames)
            n = len(frame.payload)
            if on_take is not None:
                on_take(n)
            entry.remaining -= n
            self._account(prio, -n)
            if entry.remaining <= 0:
                heapq.heappop(self._heap)
                finished = entry
                if self._closed and not self._heap:
                    self._leave()
            else:
                finished = None
            self._cv.notify_all()
        if finished is not None:
            finished.future.set_result(None)
        return frame

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self, error: BaseException | None = None) -> None:
        """Stop accepting messages. With ``error``, drop what is queued and fail its futures."""
        with self._cv:
            self._closed = True
            if not self._heap or error is not None:
                self._leave()
            if error is not None:
                self._error = error
                dropped, self._heap = self._heap, []
                for prio, _, e in dropped:
                    self._account(prio, -e.remaining)
            else:
                dropped = []
            self._cv.notify_all()
        for _, _, e in dropped:
            if not e.future.done():
                e.future.set_exception(QueueClosed(f"link from {self.sender} failed: {error}"))

    def _leave(self) -> None:
        """A closed, drained queue stops counting in the group (call with ``cv`` held)."""
        if self in self._group.members:
            self._group.members.remove(self)

    @property
    def queued_bytes(self) -> int:
        return self._queued_bytes
