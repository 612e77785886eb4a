"""Where a worker's complete inbound messages land: futures to await, or callbacks by kind.

``expect`` returns a future for one message (by sender and :class:`MessageId`);
a message that arrives first is kept until someone expects it. Kinds with a
subscribed callback (PS notifications and parameter replies) bypass the table.

A message of a subscribed kind whose destination was named (``expect_into``: a pull
reply) goes to that destination instead of the callback.

Early messages are bounded per sender by ``limits.max_peer_bytes``: a sender
whose unexpected messages would hold more is refused with :class:`InboxFull`
(a ``ValueError``, so the transport drops that sender's stream).

Streaming into a destination. ``expect_into(sender, mid, sink)`` names where a
message's bytes go (a :class:`TensorSink`: added into, or copied into, a slice of
a tensor the caller owns). A transport built with ``sinks=inbox``
(:class:`~synclab.transport.node.NodeTransport`) asks :meth:`Inbox.claim_sink`
at a message's first chunk and, when a sink waits for it, hands every chunk to
the sink as it arrives: no staging buffer, the bytes are touched once, and the
reduction of one chunk overlaps the receipt of the next. A message whose first
chunk came before its sink was named is staged as before and given to the sink
whole (the early-message path), so the result never depends on timing.
"""

from __future__ import annotations

import threading
import warnings
from concurrent.futures import Future
from typing import Callable

import torch

from synclab.wire.frames import MESSAGE_OVERHEAD_BYTES, FrameError, MessageId, MessageLimits, Received


class InboxFull(ValueError):
    """A sender's early messages would exceed its per-peer byte limit."""


def _cost(msg: Received) -> int:
    t = msg.tensor
    return MESSAGE_OVERHEAD_BYTES + (0 if t is None else t.numel() * t.element_size())


# A chunk is read through a tensor over gRPC's immutable buffer (never written): torch's one-time warning that
# such a tensor could be written to says nothing here.
warnings.filterwarnings("ignore", message="The given buffer is not writable", category=UserWarning)


class TensorSink:
    """A destination for one message's chunks: ``dst`` (a contiguous tensor) gets each chunk added (``reduce``)
    or copied at the chunk's offset. ``before``: a future to wait for before the first write (a send still
    reading ``dst``; the ring's all-gather overwrites a segment it sent during the reduce-scatter)."""

    __slots__ = ("dst", "reduce", "before", "_esize", "_nbytes")
    deliver = False  # the caller awaits the future; nothing goes to on_message

    def __init__(self, dst: torch.Tensor, *, reduce: bool, before: Future | None = None):
        if not dst.is_contiguous() or dst.device.type != "cpu":
            raise ValueError("a sink's destination must be a contiguous CPU tensor")
        self.dst, self.reduce, self.before = dst.view(-1), reduce, before
        self._esize = dst.element_size()
        self._nbytes = dst.numel() * self._esize

    def check(self, dtype: torch.dtype, total_bytes: int, what: str) -> None:
        """Refuse a message (:class:`FrameError`) that does not fit the destination."""
        if dtype != self.dst.dtype or total_bytes != self._nbytes:
            raise FrameError(f"{what}: {total_bytes} bytes of {dtype} do not fit the expected {self._nbytes} bytes "
                             f"of {self.dst.dtype}")

    def write(self, offset: int, payload) -> None:
        """Apply the bytes ``payload`` that start ``offset`` bytes into the message."""
        if self.before is not None:
            self.before.result()
            self.before = None
        n, e = len(payload), self._esize
        if not n:
            return
        if offset % e or n % e or offset + n > self._nbytes:
            raise FrameError(f"a chunk of {n} bytes at offset {offset} does not cover whole {self.dst.dtype} "
                             f"elements of the {self._nbytes}-byte destination")
        src = torch.frombuffer(payload, dtype=self.dst.dtype)  # a view of gRPC's buffer, read only
        d = self.dst[offset // e:(offset + n) // e]
        if self.reduce:
            d.add_(src)
        else:
            d.copy_(src)


class _SinkEntry:
    __slots__ = ("sink", "future", "claimed")

    def __init__(self, sink: TensorSink, future: Future):
        self.sink, self.future, self.claimed = sink, future, False


class Inbox:
    def __init__(self, limits: MessageLimits | None = None):
        self.limits = limits if limits is not None else MessageLimits()
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, MessageId], Future] = {}
        self._early: dict[tuple[str, MessageId], Received] = {}
        self._early_bytes: dict[str, int] = {}
        self._subscribers: dict[int, Callable[[Received], None]] = {}
        self._sinks: dict[tuple[str, MessageId], _SinkEntry] = {}
        self._failed: BaseException | None = None

    def subscribe(self, kind: int, callback: Callable[[Received], None]) -> None:
        self._subscribers[kind] = callback

    def expect(self, sender: str, mid: MessageId) -> Future:
        fut: Future = Future()
        with self._lock:
            if self._failed is not None:
                fut.set_exception(self._failed)
                return fut
            msg = self._early.pop((sender, mid), None)
            if msg is not None:
                self._early_bytes[sender] -= _cost(msg)
            else:
                if (sender, mid) in self._waiting or (sender, mid) in self._sinks:
                    raise RuntimeError(f"{mid} from {sender} is already expected")
                self._waiting[(sender, mid)] = fut
                return fut
        fut.set_result(msg)
        return fut

    def expect_into(self, sender: str, mid: MessageId, sink: TensorSink) -> Future:
        """Like :meth:`expect`, but the message's bytes go into ``sink`` (chunk by chunk where the transport
        streams, else whole); the future resolves, with the message and ``tensor`` None, once all are in."""
        fut: Future = Future()
        key = (sender, mid)
        with self._lock:
            if self._failed is not None:
                fut.set_exception(self._failed)
                return fut
            if key in self._waiting or key in self._sinks:
                raise RuntimeError(f"{mid} from {sender} is already expected")
            msg = self._early.pop(key, None)
            if msg is None:
                entry = _SinkEntry(sink, fut)
                self._sinks[key] = entry
                fut.add_done_callback(lambda _f: self._drop_sink(key, entry))
                return fut
            self._early_bytes[sender] -= _cost(msg)
        _apply_whole(sink, msg, fut)
        return fut

    def _drop_sink(self, key, entry: _SinkEntry) -> None:
        with self._lock:
            if self._sinks.get(key) is entry:
                del self._sinks[key]

    def claim_sink(self, sender: str, mid: MessageId) -> tuple[TensorSink, Future] | None:
        """The transport, at a message's first chunk: the sink waiting for it (now claimed), else None."""
        with self._lock:
            entry = self._sinks.get((sender, mid))
            if entry is None or entry.claimed:
                return None
            entry.claimed = True
            return entry.sink, entry.future

    def deliver(self, msg: Received) -> None:
        key = (msg.sender, msg.mid)
        cb = self._subscribers.get(msg.mid.kind)
        if cb is not None:
            with self._lock:
                named = key in self._sinks
            if not named:  # a subscribed kind goes to its callback unless this message's destination was named
                cb(msg)
                return
        with self._lock:
            fut = self._waiting.pop(key, None)
            sink_entry = self._sinks.get(key) if fut is None else None
            if sink_entry is not None:  # its sink was named after its first chunk came: staged, now applied whole
                if sink_entry.claimed:
                    raise ValueError(f"duplicate message {msg.mid} from {msg.sender}")
                sink_entry.claimed = True
            elif fut is None:
                if key in self._early:
                    raise ValueError(f"duplicate message {msg.mid} from {msg.sender}")
                held = self._early_bytes.get(msg.sender, 0)
                if held + _cost(msg) > self.limits.max_peer_bytes:
                    raise InboxFull(f"{msg.sender} sent {msg.mid} ({_cost(msg)} bytes) while {held} bytes of its "
                                    f"messages wait unread; the per-peer limit is {self.limits.max_peer_bytes} bytes")
                self._early[key] = msg
                self._early_bytes[msg.sender] = held + _cost(msg)
                return
        if sink_entry is not None:
            _apply_whole(sink_entry.sink, msg, sink_entry.future)
            return
        fut.set_result(msg)

    def early_bytes(self, sender: str) -> int:
        """Bytes of ``sender``'s messages that arrived before anyone expected them."""
        with self._lock:
            return self._early_bytes.get(sender, 0)

    def fail(self, error: BaseException) -> None:
        """Fail every pending and future expectation (a peer stream broke)."""
        with self._lock:
            self._failed = error
            waiting, self._waiting = self._waiting, {}
            sinks = [e.future for e in self._sinks.values()]
        for fut in [*waiting.values(), *sinks]:
            if not fut.done():
                fut.set_exception(error)


def _apply_whole(sink: TensorSink, msg: Received, fut: Future) -> None:
    """A message that came whole (staged, or early) into its sink; a misfit fails the future and is raised."""
    if fut.cancelled():
        return
    try:
        t = msg.tensor
        if t is None:
            raise FrameError(f"{msg.mid} from {msg.sender} carries no tensor; a tensor was expected")
        sink.check(t.dtype, t.numel() * t.element_size(), f"{msg.mid} from {msg.sender}")
        sink.write(0, memoryview(t.contiguous().view(torch.uint8).numpy()))
    except BaseException as e:
        if not fut.done():
            fut.set_exception(e)
        raise
    if not fut.done():
        fut.set_result(Received(msg.mid, msg.sender, msg.priority, None))
