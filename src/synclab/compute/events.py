"""Per-tensor events of one node (grad_ready, send_start, send_end, params_fresh) and the job timeline.

Each node keeps its events in memory (an append under a lock; cheap enough for
the backward hook) and writes ``events-<node>.csv`` when training ends; the
coordinator merges them into ``events.csv`` and a Chrome-trace ``timeline.json``
(open it in Perfetto or chrome://tracing) with one track per node: compute
(grad_ready marks) and communication spans (send_start → send_end) per tensor.
Times are wall-clock seconds, comparable across processes on one host.
"""

from __future__ import annotations

import csv
import json
import threading
import time
from pathlib import Path

EVENT_KINDS = ("grad_ready", "send_start", "send_end", "params_fresh")
COLUMNS = ["iteration", "node", "tensor", "event", "time_s"]


class EventLog:
    def __init__(self, node: str, tensor_names: list[str], enabled: bool = True):
        self.node, self.names, self.enabled = node, tensor_names, enabled
        self._rows: list[tuple[int, int, str, float]] = []
        self._lock = threading.Lock()

    def record(self, iteration: int, index: int, event: str) -> None:
        if self.enabled:
            t = time.time()
            with self._lock:
                self._rows.append((iteration, index, event, t))

    def write(self, path: Path) -> None:
        with self._lock:
            rows = list(self._rows)
        with path.open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(COLUMNS)
            for it, idx, ev, t in rows:
                w.writerow([it, self.node, self.names[idx], ev, f"{t:.6f}"])


def earliest_event_time(run_dir: Path) -> float | None:
    """The earliest raw (wall-clock) time in ``run_dir``'s ``events-<node>.csv`` files; None without events."""
    t0 = None
    for p in run_dir.glob("events-*.csv"):
        with p.open() as f:
            for r in csv.DictReader(f):
                t = float(r["time_s"])
                t0 = t if t0 is None or t < t0 else t0
    return t0


def merge_events(run_dir: Path, t0: float | None = None, dilation: float = 1.0) -> list[dict]:
    """Merge every ``events-<node>.csv`` into ``events.csv`` (times relative to the first event, divided by
    the run's time ``dilation``)."""
    rows = []
    for p in sorted(run_dir.glob("events-*.csv")):
        with p.open() as f:
            rows.extend(csv.DictReader(f))
    if not rows:
        return []
    for r in rows:
        r["time_s"] = float(r["time_s"])
        r["iteration"] = int(r["iteration"])
    t0 = min(r["time_s"] for r in rows) if t0 is None else t0
    for r in rows:
        r["time_s"] = (r["time_s"] - t0) / dilation
    rows.sort(key=lambda r: r["time_s"])
    with (run_dir / "events.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({**r, "time_s": f"{r['time_s']:.6f}"})
    for p in run_dir.glob("events-*.csv"):
        p.unlink()
    return rows


def chrome_trace(rows: list[dict], spans: list[dict] = ()) -> dict:
    """Chrome trace events: instant marks for grad_ready/params_fresh, complete spans for sends, and the
    node's wire and compute spans (``spans.csv``): compute and gate waits on the compute track, every
    message sent or received on a track of its own."""
    nodes = sorted({r["node"] for r in rows} | {r["node"] for r in spans})
    pid = {n: i for i, n in enumerate(nodes)}
    events: list[dict] = [{"name": "process_name", "ph": "M", "pid": pid[n], "args": {"name": n}} for n in nodes]
    for n in nodes:
        events.append({"name": "thread_name", "ph": "M", "pid": pid[n], "tid": 0, "args": {"name": "compute"}})
        events.append({"name": "thread_name", "ph": "M", "pid": pid[n], "tid": 1, "args": {"name": "communication"}})
        events.append({"name": "thread_name", "ph": "M", "pid": pid[n], "tid": 2, "args": {"name": "wire tx"}})
        events.append({"name": "thread_name", "ph": "M", "pid": pid[n], "tid": 3, "args": {"name": "wire rx"}})
    span_track = {"compute": 0, "gate_wait": 0, "update": 1, "tx": 2, "rx": 3}
    for r in spans:
        name = {"compute": f"iteration {r['iteration']}", "gate_wait": "gate wait", "update": "update"}.get(
            r["kind"], f"{r['kind']} {r['key']} ({r['peer']})")
        events.append({"name": name, "cat": r["kind"], "ph": "X", "ts": r["start_s"] * 1e6,
                       "dur": max((r["end_s"] - r["start_s"]) * 1e6, 1.0), "pid": pid[r["node"]],
                       "tid": span_track[r["kind"]], "args": {"iteration": r["iteration"], "bytes": r["bytes"]}})
    open_sends: dict[tuple, float] = {}
    for r in rows:
        us = r["time_s"] * 1e6
        key = (r["node"], r["tensor"], r["iteration"])
        if r["event"] == "send_start":
            open_sends[key] = us
        elif r["event"] == "send_end" and key in open_sends:
            start = open_sends.pop(key)
            events.append({"name": r["tensor"], "cat": "comm", "ph": "X", "ts": start, "dur": max(us - start, 1.0),
                           "pid": pid[r["node"]], "tid": 1, "args": {"iteration": r["iteration"]}})
        else:
            events.append({"name": f"{r['event']} {r['tensor']}", "cat": r["event"], "ph": "i", "s": "t", "ts": us,
                           "pid": pid[r["node"]], "tid": 0 if r["event"] == "grad_ready" else 1,
                           "args": {"iteration": r["iteration"]}})
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_timeline(run_dir: Path, rows: list[dict], spans: list[dict] = ()) -> Path:
    path = run_dir / "timeline.json"
    path.write_text(json.dumps(chrome_trace(rows, spans)))
    return path
