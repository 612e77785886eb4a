"""A link: the sending half of one long-lived gRPC stream to one peer.

The link owns the peer's :class:`SendScheduler` (one of its node's
:class:`SchedulerGroup`, so priority holds across destinations); :meth:`Link.frames` is the
generator gRPC consumes (as a client call's request iterator, or as a server
handler's response iterator), so gRPC's HTTP/2 flow control and the
scheduler's byte bound together keep memory bounded on slow links. Shaping for
the ``app`` backend happens here: a shared token bucket paces chunks, and a
delay line (its own thread, so delay does not serialize chunks) holds each
chunk for the one-way delay before gRPC sees it.
"""

from __future__ import annotations

import collections
import random
import threading
import time
from concurrent.futures import Future
from typing import Iterator, Protocol

from synclab.transport.scheduler import SchedulerGroup, SendScheduler
from synclab.transport.shaper import LinkShaper
from synclab.transport.spans import SpanLog
from synclab.wire import pb
from synclab.wire.frames import Message

# Approximate per-frame overhead on the wire (gRPC + HTTP/2 framing + header)
# charged to the token bucket so small frames are not free.
FRAME_OVERHEAD_BYTES = 64

KIND_NAMES = {v: k.lower() for k, v in pb.FrameKind.items()}


class ByteMeter(Protocol):
    def add_sent(self, peer: str, kind: str, nbytes: int) -> None: ...
    def add_received(self, peer: str, kind: str, nbytes: int) -> None: ...
    def set_queue_bytes(self, peer: str, band: str, nbytes: int) -> None: ...


class NullMeter:
    def add_sent(self, peer, kind, nbytes): ...
    def add_received(self, peer, kind, nbytes): ...
    def set_queue_bytes(self, peer, band, nbytes): ...


def priority_band(priority: int) -> str:
    """Queue-depth metric label: bands 0..7 individually, then one band for the rest."""
    return str(priority) if priority < 8 else "8+"


class Link:
    def __init__(self, owner: str, peer: str, *, policy: str, chunk_bytes: int, capacity_bytes: int,
                 shaper: LinkShaper | None, meter: ByteMeter, spans: SpanLog | None = None,
                 group: SchedulerGroup | None = None):
        self.owner, self.peer, self.meter, self.spans = owner, peer, meter, spans
        self.scheduler = SendScheduler(owner, policy, chunk_bytes, capacity_bytes, group=group,
                                       on_depth=lambda band, n: meter.set_queue_bytes(peer, priority_band(band), n))
        self.shaper = shaper or LinkShaper()
        self.abort_error: BaseException | None = None
        self.bytes_sent = 0
        self._tx_first: dict[tuple, float] = {}  # message -> when its first chunk went to gRPC (spans on)

    def send(self, msg: Message) -> Future:
        return self.scheduler.put(msg)

    @property
    def closed(self) -> bool:
        return self.scheduler.closed

    def close(self, error: BaseException | None = None, abort: bool = False) -> None:
        """Close after draining (``error`` None) or at once; ``abort`` marks a refused stream."""
        if abort:
            self.abort_error = error
        self.scheduler.close(error)

    def _paced(self) -> Iterator[pb.Frame]:
        state = {"wait": 0.0, "backlogged": False}

        def reserve(n: int) -> None:  # under the scheduler's lock: pacing order = the scheduler's order
            bucket = self.shaper.bucket  # read per chunk: a reshape may replace or remove it
            state["wait"] = 0.0 if bucket is None else bucket.reserve(n + FRAME_OVERHEAD_BYTES, state["backlogged"])

        while True:
            state["backlogged"] = self.scheduler.queued_bytes > 0
            frame = self.scheduler.next_frame(reserve)
            if frame is None:
                return
            n = len(frame.payload)
            if state["wait"] > 0:
                time.sleep(state["wait"])
            self.bytes_sent += n
            self.meter.add_sent(self.peer, KIND_NAMES[frame.header.kind], n)
            if self.spans is not None:
                self._span(frame.header, n)
            yield frame

    def _span(self, h: pb.FrameHeader, n: int) -> None:
        """A message's tx span: from its first chunk to its last, as handed to gRPC."""
        now = self.spans.now()
        mid = (h.key, h.slice, h.iteration, h.tag)
        if h.offset == 0:
            self._tx_first[mid] = now
        if h.offset + n >= h.total_bytes:
            self.spans.add("tx", h.iteration, self._tx_first.pop(mid, now), now, peer=self.peer, key=h.key,
                           slice_=h.slice, nbytes=h.total_bytes)

    def frames(self) -> Iterator[pb.Frame]:
        if self.shaper.delay_s <= 0:
            yield from self._paced()
            return
        yield from _DelayLine(self._paced(), self.shaper.delay_s, self.owner, self.peer, self.shaper.jitter_s)


class _DelayLine:
    """Release each frame ``delay_s`` (± uniform ``jitter_s``) after it left the pacer, in order.

    Like netem without reordering, a frame never overtakes the one before it: its
    release time is at least the previous frame's. A thread keeps the pipe full.
    """

    def __init__(self, source: Iterator[pb.Frame], delay_s: float, owner: str, peer: str, jitter_s: float = 0.0):
        self._source, self._delay_s, self._jitter_s = source, delay_s, jitter_s
        self._rng = random.Random()
        self._q: collections.deque = collections.deque()
        self._cv = threading.Condition()
        self._done = False
        threading.Thread(target=self._pump, name=f"delay-{owner}-{peer}", daemon=True).start()

    def _pump(self) -> None:
        last = 0.0
        try:
            for frame in self._source:
                d = self._delay_s + (self._rng.uniform(-self._jitter_s, self._jitter_s) if self._jitter_s else 0.0)
                last = max(last, time.monotonic() + d)
                with self._cv:
                    self._q.append((last, frame))
                    self._cv.notify()
        finally:
            with self._cv:
                self._done = True
                self._cv.notify()

    def __iter__(self):
        while True:
            with self._cv:
                while not self._q and not self._done:
                    self._cv.wait()
                if not self._q:
                    return
                release, frame = self._q.popleft()
            wait = release - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            yield frame
