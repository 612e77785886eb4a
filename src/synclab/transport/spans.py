"""What a node's wire and compute did, as time spans: the raw material of the overlap measure.

Every node keeps one :class:`SpanLog`. The transport adds a ``tx`` span per
message it sends (first chunk handed to gRPC → last chunk handed to gRPC) and
an ``rx`` span per message it receives (first chunk arrived → message
complete); the worker adds a ``compute`` span per iteration (its forward and
backward passes, from the start of the iteration to the end of its last
pass) and the gates add a ``gate_wait`` span whenever forward blocked on stale
parameters; a worker-side optimizer step adds an ``update`` span. Each node writes ``spans-<node>.csv`` when training ends; the
coordinator merges them into ``spans.csv`` (see
:mod:`synclab.report.overlap`, which turns them into the per-iteration
overlap of communication with compute).

Times are wall-clock seconds (``time.time()``), comparable across the
processes and containers of one host; perf_counter readings are converted
with the offset taken when the log was created. Appends are O(1) under a lock
and happen once per message, never per chunk.
"""

from __future__ import annotations

import csv
import threading
import time
from pathlib import Path

SPAN_KINDS = ("tx", "rx", "compute", "gate_wait", "update")
COLUMNS = ["node", "kind", "iteration", "peer", "key", "slice", "bytes", "start_s", "end_s"]


class SpanLog:
    def __init__(self, node: str, enabled: bool = True):
        self.node, self.enabled = node, enabled
        self._offset = time.time() - time.perf_counter()
        self._rows: list[tuple] = []
        self._lock = threading.Lock()

    @staticmethod
    def now() -> float:
        return time.time()

    def wall(self, perf_counter_s: float) -> float:
        """A ``time.perf_counter()`` reading as wall-clock seconds."""
        return perf_counter_s + self._offset

    def add(self, kind: str, iteration: int, start_s: float, end_s: float, *, peer: str = "", key: str = "",
            slice_: int = 0, nbytes: int = 0) -> None:
        """One span in wall-clock seconds."""
        if self.enabled:
            with self._lock:
                self._rows.append((kind, iteration, peer, key, slice_, nbytes, start_s, end_s))

    def __len__(self) -> int:
        return len(self._rows)

    def write(self, path: Path) -> None:
        with self._lock:
            rows = list(self._rows)
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for kind, it, peer, key, sl, nbytes, start, end in rows:
                w.writerow([self.node, kind, it, peer, key, sl, nbytes, f"{start:.6f}", f"{end:.6f}"])


def read_raw_spans(run_dir: Path) -> list[dict]:
    """Every ``spans-<node>.csv`` of ``run_dir`` with numeric fields, times as written (wall clock)."""
    rows: list[dict] = []
    for p in sorted(run_dir.glob("spans-*.csv")):
        with p.open() as f:
            rows.extend(csv.DictReader(f))
    for r in rows:
        r["iteration"], r["slice"], r["bytes"] = int(r["iteration"]), int(r["slice"]), int(r["bytes"])
        r["start_s"], r["end_s"] = float(r["start_s"]), float(r["end_s"])
    return rows


def merge_spans(run_dir: Path, t0: float, dilation: float = 1.0) -> list[dict]:
    """Merge every ``spans-<node>.csv`` into ``spans.csv``: times relative to ``t0``, divided by ``dilation``."""
    rows = read_raw_spans(run_dir)
    for r in rows:
        r["start_s"] = (r["start_s"] - t0) / dilation
        r["end_s"] = (r["end_s"] - t0) / dilation
    rows.sort(key=lambda r: (r["start_s"], r["end_s"]))
    if rows:
        with (run_dir / "spans.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=COLUMNS)
            w.writeheader()
            for r in rows:
                w.writerow({**r, "start_s": f"{r['start_s']:.6f}", "end_s": f"{r['end_s']:.6f}"})
    for p in run_dir.glob("spans-*.csv"):
        p.unlink()
    return rows
