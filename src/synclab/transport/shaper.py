"""In-process link shaping for the ``app`` backend: a token bucket for rate, a delay line for latency.

Used when the kernel cannot shape (no root, or ``--isolation none``). One
:class:`TokenBucket` per node is shared by all of the node's outgoing links, as a
NIC's egress rate is shared by every peer behind it.
"""

from __future__ import annotations

import threading
import time

from synclab.netem.profile import bucket_for

CATCH_UP_S = 0.05


class TokenBucket:
    """Classic token bucket: ``rate_bps`` bits/s refill, ``burst_bytes`` depth.

    :meth:`consume` blocks the calling sender until the bytes may leave. The
    depth when not given is :func:`synclab.netem.profile.bucket_for`'s (4 ms of
    the rate, at least 64 KiB).
    """

    def __init__(self, rate_bps: float, burst_bytes: int | None = None, clock=time.monotonic, sleep=time.sleep):
        if rate_bps <= 0:
            raise ValueError(f"rate_bps must be positive, got {rate_bps}")
        self._lock = threading.Lock()
        self._clock, self._sleep = clock, sleep
        self.set_rate(rate_bps, burst_bytes)

    def set_rate(self, rate_bps: float, burst_bytes: int | None = None) -> None:
        with self._lock:
            self.rate_Bps = rate_bps / 8.0
            self.burst_bytes = burst_bytes or bucket_for(rate_bps).burst_bytes
            self._tokens = float(self.burst_bytes)
            self._last = self._clock()

    def consume(self, nbytes: int, backlogged: bool = False) -> float:
        """Take ``nbytes`` tokens, sleeping while the bucket is in debt; returns the time waited.

        ``backlogged``: the sender had data waiting all along, so time it lost to the
        CPU scheduler (not idleness) is credited back, up to ``CATCH_UP_S`` of the
        rate; an idle sender only ever gets ``burst_bytes``.
        """
        wait = self.reserve(nbytes, backlogged)
        if wait > 0:
            self._sleep(wait)
        return wait

    def reserve(self, nbytes: int, backlogged: bool = False) -> float:
        """Take ``nbytes`` tokens now and return how long the caller must wait before sending them.

        Reservations are served in the order they are made, whenever the callers get to sleep: a
        sender that reserves while it holds its scheduler's lock keeps the pacing order equal to the
        order the scheduler chose (:meth:`consume` is reserve-then-sleep).
        """
        with self._lock:
            now = self._clock()
            cap = max(self.burst_bytes, self.rate_Bps * CATCH_UP_S) if backlogged else self.burst_bytes
            self._tokens = min(cap, self._tokens + (now - self._last) * self.rate_Bps)
            self._last = now
            self._tokens -= nbytes
            debt = -self._tokens
            return debt / self.rate_Bps if debt > 0 else 0.0


class LinkShaper:
    """Shaping applied by the transport: a shared token bucket (may be None) and a one-way delay."""

    def __init__(self, rate_bps: float | None = None, delay_s: float = 0.0, burst_bytes: int | None = None,
                 chunk_bytes: int = 1 << 20, jitter_s: float = 0.0):
        if delay_s < 0 or jitter_s < 0:
            raise ValueError(f"delay_s and jitter_s must not be negative, got {delay_s}, {jitter_s}")
        if jitter_s > delay_s:
            raise ValueError(f"jitter_s ({jitter_s}) must not exceed delay_s ({delay_s})")
        self.jitter_s = jitter_s
        self._burst_bytes, self._chunk_bytes = burst_bytes, chunk_bytes
        self.bucket = TokenBucket(rate_bps, self._burst(rate_bps)) if rate_bps else None
        self.delay_s = delay_s

    def _burst(self, rate_bps: float) -> int:
        """Bucket depth: as given, else :func:`~synclab.netem.profile.bucket_for` with room for one chunk."""
        return self._burst_bytes or bucket_for(rate_bps, chunk_bytes=self._chunk_bytes).burst_bytes

    @property
    def active(self) -> bool:
        return self.bucket is not None or self.delay_s > 0

    @property
    def rate_bps(self) -> float | None:
        return None if self.bucket is None else self.bucket.rate_Bps * 8

    def set_rate(self, rate_bps: float | None) -> None:
        if rate_bps is None:
            self.bucket = None
        elif self.bucket is None:
            self.bucket = TokenBucket(rate_bps, self._burst(rate_bps))
        else:
            self.bucket.set_rate(rate_bps, self._burst(rate_bps))
