"""Where a worker's complete inbound messages land: futures to await, or callbacks by kind.

``expect`` returns a future for one message (by sender and :class:`MessageId`);
a message that arrives first is kept until someone expects it. Kinds with a
subscribed callback (PS notifications and parameter replies) bypass the table.

Early messages are bounded per sender by ``limits.max_peer_bytes``: a sender
whose unexpected messages would hold more is refused with :class:`InboxFull`
(a ``ValueError``, so the transport drops that sender's stream).
"""

from __future__ import annotations

import threading
from concurrent.futures import Future
from typing import Callable

from synclab.wire.frames import MESSAGE_OVERHEAD_BYTES, MessageId, MessageLimits, Received


class InboxFull(ValueError):
    """A sender's early messages would exceed its per-peer byte limit."""


def _cost(msg: Received) -> int:
    t = msg.tensor
    return MESSAGE_OVERHEAD_BYTES + (0 if t is None else t.numel() * t.element_size())


class Inbox:
    def __init__(self, limits: MessageLimits | None = None):
        self.limits = limits if limits is not None else MessageLimits()
        self._lock = threading.Lock()
        self._waiting: dict[tuple[str, MessageId], Future] = {}
        self._early: dict[tuple[str, MessageId], Received] = {}
        self._early_bytes: dict[str, int] = {}
        self._subscribers: dict[int, Callable[[Received], None]] = {}
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
                if (sender, mid) in self._waiting:
                    raise RuntimeError(f"{mid} from {sender} is already expected")
                self._waiting[(sender, mid)] = fut
                return fut
        fut.set_result(msg)
        return fut

    def deliver(self, msg: Received) -> None:
        cb = self._subscribers.get(msg.mid.kind)
        if cb is not None:
            cb(msg)
            return
        key = (msg.sender, msg.mid)
        with self._lock:
            fut = self._waiting.pop(key, None)
            if fut is None:
                if key in self._early:
                    raise ValueError(f"duplicate message {msg.mid} from {msg.sender}")
                held = self._early_bytes.get(msg.sender, 0)
                if held + _cost(msg) > self.limits.max_peer_bytes:
                    raise InboxFull(f"{msg.sender} sent {msg.mid} ({_cost(msg)} bytes) while {held} bytes of its "
                                    f"messages wait unread; the per-peer limit is {self.limits.max_peer_bytes} bytes")
                self._early[key] = msg
                self._early_bytes[msg.sender] = held + _cost(msg)
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
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(error)
