"""In-process link shaping for the ``app`` backend: a token bucket for rate, a delay line for latency.

Used when the kernel cannot shape (no root, or ``--isolation none``). One
:class:`TokenBucket` per node is shared by all of the node's outgoing links, as a
NIC's egress rate is shared by every peer behind it.

Sizing rule: one function, :func:`bucket_for`, sizes every shaper — the tc
builders (tbf, htb, :mod:`synclab.netem.tc`) and the ``app`` token bucket here
alike; where they differ it is through its explicit arguments:

* burst = max(4 ms of the rate, 64 KiB). 4 ms is rate/HZ for HZ=250 (Debian's
  kernels), the least tbf needs to keep up, and was measured accurate from
  100 Mbit/s to 5 Gbit/s under tbf; 64 KiB lets one GSO super-packet or one
  transport chunk header through at low rates without stalling.
* ``kernel=True`` (tbf; htb for both ``burst`` and ``cburst``): a floor of 8 ms
  of the rate above 1 Gbit/s: with 4 ms both under-shot at 2 Gbit/s on a 2-core
  host (tbf 0.938, htb 0.962 of the rate, measured side by side); and a floor of
  96 KiB: tbf cuts a GSO super-packet longer than its bucket into MTU-sized
  packets and queues them one by one (the kernel's ``tbf_segment``), and a 64 KiB
  super-packet with its segments' headers (~68.5 kB as the qdisc counts it) does
  not fit 64 KiB. Measured (2026-11-27, 2-rank ring alone, 125 Mbit/s): 64 KiB
  bucket 20.7 CPU s/GB (gloo 6.9), 128 KB bucket 3.1 (gloo 1.1), the same
  throughput; above ~200 Mbit/s 4 ms of the rate is larger anyway. htb also gets
  an explicit ``quantum`` of min(rate/10 per s, 200 000) bytes so it does not
  warn or fall back to r2q.
* ``chunk_bytes`` (the ``app`` bucket, charged a whole transport chunk at once):
  the 64 KiB floor grows by one chunk, so a chunk always fits in the bucket.
* queue (tbf/bfifo limit) = max(2 × burst, 25 ms of the rate), capped at 2 GiB
  (tc's limits are 32-bit); where the kernel itself delays packets (netem) its
  limit adds 2 × rate × (delay + jitter) so the delay line never drops.
* a profile's ``burst``/``queue``, when set, are used as given by tc (the
  ``app`` bucket is built from the rate and the chunk size alone); a profile's
  *derived* values (:func:`profile_bucket` without ``kernel``, what
  ``synclab profiles`` shows and what :func:`synclab.netem.dilation.dilate`
  keeps in bytes) are the rule without either argument.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from synclab.linkprofile import LinkProfile

CATCH_UP_S = 0.05
BURST_S = 0.004  # 4 ms of the rate
KERNEL_BURST_S = 0.008  # tbf and htb above KERNEL_BIG_RATE_BPS
KERNEL_BIG_RATE_BPS = 1_000_000_000
MIN_BURST_BYTES = 64 << 10
KERNEL_MIN_BURST_BYTES = 96 << 10  # tbf and htb: a GSO super-packet with its segments' headers fits (see bucket_for)
QUEUE_S = 0.025
MAX_QUEUE_BYTES = 2 << 30


@dataclass(frozen=True)
class Bucket:
    """A shaper's token-bucket depth and queue limit, in bytes."""

    burst_bytes: int
    queue_bytes: int


def bucket_for(rate_bps: float, *, burst_bytes: int | None = None, queue_bytes: int | None = None,
               kernel: bool = False, chunk_bytes: int = 0) -> Bucket:
    """The one sizing rule for every shaper of a ``rate_bps`` link (see the module docstring).

    A configured ``burst_bytes``/``queue_bytes`` is kept as given; otherwise
    burst = max(4 ms of the rate, 64 KiB + ``chunk_bytes``) and queue =
    max(2 × burst, 25 ms of the rate), capped at 2 GiB.

    ``kernel``: the shaper is tbf or htb, which also get 8 ms of the rate above
    1 Gbit/s (they under-shoot with 4 ms there) and at least 96 KiB (a GSO
    super-packet fits; a smaller tbf bucket segments it, 4-7x the host's CPU per
    byte). The ``app`` token bucket leaves both out: it credits time lost to the
    CPU scheduler back itself and is charged whole chunks.
    ``chunk_bytes``: the shaper releases whole chunks of this size (the ``app``
    bucket, which is charged a transport chunk at once), so the floor must hold
    one on top of the 64 KiB; a bucket shallower than a chunk loses the tokens
    that accrue while the chunk is written and the link undershoots its rate.
    """
    if burst_bytes is None:
        burst_bytes = max(MIN_BURST_BYTES + chunk_bytes, int(rate_bps / 8 * BURST_S))
        if kernel:
            burst_bytes = max(burst_bytes, KERNEL_MIN_BURST_BYTES)
            if rate_bps > KERNEL_BIG_RATE_BPS:
                burst_bytes = max(burst_bytes, int(rate_bps / 8 * KERNEL_BURST_S))
    if queue_bytes is None:
        queue_bytes = min(MAX_QUEUE_BYTES, max(2 * burst_bytes, int(rate_bps / 8 * QUEUE_S)))
    return Bucket(burst_bytes, queue_bytes)


def profile_bucket(profile: LinkProfile, *, kernel: bool = False) -> Bucket | None:
    """:func:`bucket_for` a profile's rate, burst and queue; None without a rate.

    Without ``kernel`` it is the profile's derived burst and queue (what
    ``synclab profiles`` shows and what :func:`synclab.netem.dilation.dilate`
    keeps in bytes); with it, what tbf and htb get.
    """
    if profile.rate_bps is None:
        return None
    return bucket_for(profile.rate_bps, burst_bytes=profile.burst_bytes, queue_bytes=profile.queue_bytes,
                      kernel=kernel)



class TokenBucket:
    """Classic token bucket: ``rate_bps`` bits/s refill, ``burst_bytes`` depth.

    :meth:`consume` blocks the calling sender until the bytes may leave. The
    depth when not given is :func:`bucket_for`'s (4 ms of
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
        """Bucket depth: as given, else :func:`bucket_for` with room for one chunk."""
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
