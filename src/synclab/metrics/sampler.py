"""The 10 ms traffic sampler: the high-resolution tx/rx trace behind P3 Fig. 8/9-style timelines.

A daemon thread wakes on an absolute schedule (tick k at start + k·interval, so
bins do not drift), reads the node's cumulative application-level byte totals
and the wire-level interface counters, and appends one row per bin to
``traffic-<node>.csv``. Rows are buffered and written every ``flush_every_s``
and on stop (no fsync per row).

Row i covers the bin (t_{i-1}, t_i], t_0 = 0 being :meth:`TrafficSampler.start`:
``tx_bps``/``rx_bps`` are the bits sent/received in that bin over its measured
length. Every full bin also goes to the node's metrics
(:meth:`NodeMetrics.observe_bin`): counted as idle, tx only, rx only or both,
and towards the peak 10 ms rate, so Prometheus sees what P3 Fig. 8/9 show. A bin's
state comes from payload bytes (keepalives and ACKs do not make a link busy);
the peak rate from the interface counters where the node has its own interface
(what the link carried), else from payload bytes handed to gRPC, which may burst
above the link rate into socket buffers. A tick missed entirely (the thread was not scheduled for more than an
interval) is skipped, not made up with near-empty bins: that row's bin is
simply longer.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Self

from synclab.metrics.interfaces import InterfaceReader
from synclab.metrics.node import NodeMetrics

COLUMNS = ("t_s", "wall_time", "tx_bytes", "rx_bytes", "tx_bps", "rx_bps", "if_tx_bytes", "if_rx_bytes")


def next_tick(k: int, now: float, start: float, interval_s: float) -> int:
    """Index of the next tick after tick ``k`` was taken at ``now``: k + 1, or the first deadline still ahead."""
    return max(k + 1, math.floor((now - start) / interval_s) + 1)


class RunningStats:
    """Count, mean, standard deviation, min and max of a stream (Welford's update, O(1) memory)."""

    def __init__(self) -> None:
        self.count = 0
        self.mean = 0.0
        self._m2 = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, x: float) -> None:
        self.count += 1
        d = x - self.mean
        self.mean += d / self.count
        self._m2 += d * (x - self.mean)
        self.min = min(self.min, x)
        self.max = max(self.max, x)

    @property
    def std(self) -> float:
        """Population standard deviation (0 for fewer than two values)."""
        return math.sqrt(self._m2 / self.count) if self.count > 1 else 0.0


@dataclass(frozen=True)
class SamplerStats:
    """How well the sampler kept its schedule.

    ``interval`` describes the measured bin lengths (nominally ``interval_s``);
    ``lateness`` how long after its deadline each tick woke up; ``skipped_ticks``
    counts deadlines missed by more than a whole interval.
    """

    bins: int
    mean_interval_s: float
    interval_std_s: float
    min_interval_s: float
    max_interval_s: float
    mean_lateness_s: float
    max_lateness_s: float
    skipped_ticks: int


class TrafficSampler:
    """Appends a row of cumulative and per-bin traffic to ``path`` every ``interval_s``.

    ``interfaces``: the interfaces whose wire-level counters are summed into
    ``if_tx_bytes``/``if_rx_bytes``; None takes the node's own choice
    (:meth:`NodeMetrics.wire_interfaces`, fixed at start), ``[]`` none. The
    columns stay empty where no counter is available.
    """

    def __init__(self, metrics: NodeMetrics, path: str | Path, interval_s: float = 0.010,
                 interfaces: Sequence[str] | None = None, *, flush_every_s: float = 1.0):
        if not interval_s > 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        if not flush_every_s > 0:
            raise ValueError(f"flush_every_s must be positive, got {flush_every_s}")
        self.metrics, self.path, self.interval_s = metrics, Path(path), interval_s
        self.interfaces = interfaces
        self.flush_every_s = flush_every_s
        self._stop = threading.Event()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self._done = False  # the thread has ended
        self._error: BaseException | None = None
        self.samples = 0  # rows taken so far (written or buffered)
        self._intervals = RunningStats()
        self._lateness = RunningStats()
        self._skipped = 0

    # -- lifecycle --------------------------------------------------------------------------------------------

    def start(self) -> TrafficSampler:
        if self._thread is not None or self._stopped:
            raise RuntimeError(f"traffic sampler for {self.path} was already started")
        names = self.metrics.wire_interfaces() if self.interfaces is None else list(self.interfaces)
        reader = InterfaceReader(names, self.metrics.sys_net)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            f = self.path.open("w", buffering=1 << 16)
        except OSError:
            reader.close()
            raise
        f.write(",".join(COLUMNS) + "\n")
        f.flush()
        start = time.monotonic()
        self._thread = threading.Thread(target=self._run, args=(f, reader, start), daemon=True,
                                        name=f"traffic-sampler-{self.metrics.node}")
        self._thread.start()
        return self

    def stop(self, timeout_s: float = 5.0) -> None:
        """Take a last sample, write every buffered row and close the file (idempotent).

        Raises if the sampling thread failed: a trace with a silent hole is worse than none.
        """
        if self._stopped:
            return
        self._stopped = True
        if self._thread is None:
            return
        self._stop.set()
        self._thread.join(timeout_s)
        if self._thread.is_alive():
            raise RuntimeError(f"traffic sampler for {self.path} did not stop within {timeout_s} s")
        if self._error is not None:
            raise RuntimeError(f"traffic sampler for {self.path} failed: {self._error}") from self._error

    def __enter__(self) -> Self:
        if self._thread is None:
            self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- observation ------------------------------------------------------------------------------------------

    def wait_samples(self, n: int, timeout_s: float) -> bool:
        """Block until at least ``n`` rows were taken; False on timeout or if the sampler ended first."""
        with self._cond:
            self._cond.wait_for(lambda: self.samples >= n or self._done or self._thread is None, timeout_s)
            return self.samples >= n

    def stats(self) -> SamplerStats:
        with self._cond:
            iv, late = self._intervals, self._lateness
            return SamplerStats(bins=iv.count, mean_interval_s=iv.mean, interval_std_s=iv.std,
                                min_interval_s=iv.min if iv.count else 0.0,
                                max_interval_s=iv.max if iv.count else 0.0, mean_lateness_s=late.mean,
                                max_lateness_s=late.max if late.count else 0.0, skipped_ticks=self._skipped)

    # -- the sampling thread ----------------------------------------------------------------------------------

    def _run(self, f, reader: InterfaceReader, start: float) -> None:
        m, interval = self.metrics, self.interval_s
        last_t = start
        last_tx, last_rx = m.totals()
        last_wire = None
        rows: list[str] = []
        next_flush = start + self.flush_every_s
        k = 1
        try:
            while True:
                deadline = start + k * interval
                stopping = False
                while not stopping and (wait := deadline - time.monotonic()) > 0:
                    stopping = self._stop.wait(wait)
                now = time.monotonic()
                wall = time.time()
                tx, rx = m.totals()
                wire = reader.read()
                dt = now - last_t
                if dt > 0:
                    tx_bps, rx_bps = (tx - last_tx) * 8 / dt, (rx - last_rx) * 8 / dt
                else:
                    tx_bps = rx_bps = 0.0
                if not stopping:  # a full bin: exported as idle / tx / rx / both and towards the peak rate
                    peak_tx, peak_rx = tx_bps, rx_bps
                    if wire is not None and last_wire is not None and dt > 0:  # the link's own rate, framing incl.
                        peak_tx, peak_rx = (wire[0] - last_wire[0]) * 8 / dt, (wire[1] - last_wire[1]) * 8 / dt
                    m.observe_bin(tx - last_tx, rx - last_rx, peak_tx, peak_rx)
                last_wire = wire
                if_tx, if_rx = ("", "") if wire is None else wire
                rows.append(f"{now - start:.6f},{wall:.6f},{tx},{rx},{tx_bps:.0f},{rx_bps:.0f},{if_tx},{if_rx}\n")
                nxt = next_tick(k, now, start, interval)
                with self._cond:
                    self.samples += 1
                    if not stopping:  # the last bin is cut short by stop(), not by the schedule
                        self._intervals.add(dt)
                        self._lateness.add(now - deadline)
                    self._skipped += nxt - k - 1
                    self._cond.notify_all()
                last_t, last_tx, last_rx, k = now, tx, rx, nxt
                if stopping or now >= next_flush:
                    f.writelines(rows)
                    f.flush()
                    rows.clear()
                    next_flush = now + self.flush_every_s
                if stopping:
                    return
        except BaseException as e:  # re-raised by stop()
            self._error = e
        finally:
            reader.close()
            f.close()
            with self._cond:
                self._done = True
                self._cond.notify_all()
