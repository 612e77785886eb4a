"""The 10 ms traffic sampler: the high-resolution tx/rx trace behind P3 Fig. 8/9-style timelines.

A daemon thread wakes on an absolute schedule (start + k·interval, so bins do not
drift), reads the node's cumulative byte totals and the wire-level interface
counters, and appends one row per bin to ``traffic-<node>.csv`` (buffered, flushed
every second and on stop).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from synclab.metrics.node import NodeMetrics, interface_counters

COLUMNS = ("t_s", "wall_time", "tx_bytes", "rx_bytes", "tx_bps", "rx_bps", "if_tx_bytes", "if_rx_bytes")


class TrafficSampler:
    def __init__(self, metrics: NodeMetrics, path: str | Path, interval_s: float = 0.010,
                 interfaces: list[str] | None = None, flush_every_s: float = 1.0):
        if interval_s <= 0:
            raise ValueError(f"interval_s must be positive, got {interval_s}")
        self.metrics, self.path, self.interval_s = metrics, Path(path), interval_s
        self.interfaces = interfaces if interfaces is not None else metrics.interfaces
        self._flush_every = max(1, int(flush_every_s / interval_s))
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.intervals: list[float] = []   # measured bin lengths (for jitter reports)

    def start(self) -> "TrafficSampler":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._file = self.path.open("w")
        self._file.write(",".join(COLUMNS) + "\n")
        self._thread = threading.Thread(target=self._run, name=f"sampler-{self.metrics.node}", daemon=True)
        self._thread.start()
        return self

    def _read_if(self) -> tuple[int | None, int | None]:
        c = interface_counters(self.interfaces)
        if not c:
            return None, None
        return sum(t for t, _ in c.values()), sum(r for _, r in c.values())

    def _run(self) -> None:
        m = self.metrics
        t0 = time.monotonic()
        last_t, last_tx, last_rx = t0, m.total_sent(), m.total_received()
        rows: list[str] = []
        k = 0
        while True:
            k += 1
            wait = t0 + k * self.interval_s - time.monotonic()
            stopping = self._stop.wait(wait) if wait > 0 else self._stop.is_set()
            now = time.monotonic()
            tx, rx = m.total_sent(), m.total_received()
            ift, ifr = self._read_if()
            dt = now - last_t
            self.intervals.append(dt)
            rows.append(f"{now - t0:.4f},{time.time():.4f},{tx},{rx},{(tx - last_tx) * 8 / dt:.0f},"
                        f"{(rx - last_rx) * 8 / dt:.0f},{'' if ift is None else ift},{'' if ifr is None else ifr}\n")
            last_t, last_tx, last_rx = now, tx, rx
            if stopping or len(rows) >= self._flush_every:
                self._file.writelines(rows)
                self._file.flush()
                rows.clear()
            if stopping:
                return

    def stop(self) -> None:
        if self._thread is None or self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        self._file.close()

    def __enter__(self) -> "TrafficSampler":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()
