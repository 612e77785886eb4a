"""Network utilization of one worker machine, as P3 Fig. 8/9 show it (P3 §5.3).

The paper: "The network utilization is measured per interface level using Linux's bwm-ng tool at a 10
millisecond granularity", for "one of the four worker machines" (which also hosts a server). SyncLab's
:class:`~synclab.metrics.sampler.TrafficSampler` writes ``traffic-<node>.csv`` every 10 ms of **host** time with
cumulative byte counters: ``tx_bytes``/``rx_bytes`` are the node process's own payload, ``if_tx_bytes``/
``if_rx_bytes`` the counters of the node's network interface. With ``cluster.colocate_ps`` worker0 and ps0 share
one namespace, so both files carry the *same* interface counters: the machine's traffic is that interface
(read once, not summed), which — like bwm-ng — leaves out what worker0 and ps0 send each other over loopback.
Only where no interface counter was recorded does the machine's traffic fall back to the sum of its processes'
payload bytes (then local traffic is counted too; ``source`` says which was used).

Under time dilation D the emulated clock runs D times slower than the host's, so one 10 ms **emulated** bin is
D·10 ms of host time; its rate is its bytes over 10 ms (the host rate × D). Bins are cut at exact emulated
boundaries from the cumulative counters (linear interpolation between samples), so a late or skipped sampler
tick moves bytes between neighbouring bins only by its own jitter.

Definitions (reproduction-targets.md §3, made exact here):

* ``idle_share``: share of emulated 10 ms bins in which the link is idle both ways — tx **and** rx below 10 %
  of the link rate. A bin in which the machine receives at full rate is not network idle time; the paper's
  idle stretches are where both its curves sit at zero. ``tx_idle_share`` is the tx-only variant.
* ``tx_util``/``rx_util``: mean rate over the window as a share of the link rate, each direction.
* ``overlap_share``: share of bins in which tx and rx both exceed 25 % of the link ("bidirectional bandwidth").

The window is the measured iterations: from the moment the last byte of the last warm-up iteration arrived to
the moment the last byte of the last iteration arrived (spans.csv), i.e. a whole number of iteration periods
cut at the same phase for every strategy.
"""

from __future__ import annotations

import bisect
import csv
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BIN_S = 0.010  # the paper's bwm-ng granularity, in emulated seconds
IDLE_BELOW = 0.10
BUSY_ABOVE = 0.25


@dataclass(frozen=True)
class Counter:
    """Cumulative bytes of one machine at host wall-clock times (increasing)."""

    wall: list[float]
    tx: list[float]
    rx: list[float]

    def at(self, t: float) -> tuple[float, float]:
        """(tx, rx) bytes at wall time ``t``, linear between samples; clamped to the first/last sample."""
        w = self.wall
        if t <= w[0]:
            return self.tx[0], self.rx[0]
        if t >= w[-1]:
            return self.tx[-1], self.rx[-1]
        i = bisect.bisect_right(w, t)
        f = (t - w[i - 1]) / (w[i] - w[i - 1])
        return (self.tx[i - 1] + f * (self.tx[i] - self.tx[i - 1]),
                self.rx[i - 1] + f * (self.rx[i] - self.rx[i - 1]))


def machine_counter(files: Mapping[str, Iterable[Mapping[str, str]]]) -> tuple[Counter, str]:
    """One machine's cumulative counter from the rows of its nodes' traffic CSVs (node name -> rows).

    Interface counters where the first node's file has them (all nodes of a machine share its interface, so
    one file is read); else the payload counters of every node, summed at the first node's sample times.
    Returns the counter and its source ("interface" or "payload")."""
    if not files:
        raise ValueError("no traffic rows for the machine")
    tables = {n: list(rows) for n, rows in files.items()}
    first = next(iter(tables))
    rows = [r for r in tables[first] if r.get("if_tx_bytes") not in (None, "")
            and r.get("if_rx_bytes") not in (None, "")]
    if len(rows) >= 2:
        return Counter([float(r["wall_time"]) for r in rows], [float(r["if_tx_bytes"]) for r in rows],
                       [float(r["if_rx_bytes"]) for r in rows]), "interface"
    counters = []
    for node, rs in tables.items():
        if len(rs) < 2:
            raise ValueError(f"traffic of {node}: fewer than two samples")
        counters.append(Counter([float(r["wall_time"]) for r in rs], [float(r["tx_bytes"]) for r in rs],
                                [float(r["rx_bytes"]) for r in rs]))
    base = counters[0].wall
    sums = [[sum(c.at(t)[k] for c in counters) for t in base] for k in (0, 1)]
    return Counter(list(base), sums[0], sums[1]), "payload"


def emulated_bins(counter: Counter, t0_wall: float, start_s: float, end_s: float, dilation: float,
                  bin_s: float = BIN_S) -> list[tuple[float, float, float]]:
    """(emulated start s, tx bit/s, rx bit/s) of each whole emulated bin in [start_s, end_s).

    Emulated time s is host wall time t0_wall + s·D; a bin's rate is its bytes·8 over ``bin_s`` (emulated)."""
    if not dilation > 0:
        raise ValueError(f"dilation must be positive, got {dilation}")
    if not end_s > start_s:
        raise ValueError(f"empty window [{start_s}, {end_s})")
    n = int((end_s - start_s) / bin_s + 1e-9)
    edges = [counter.at(t0_wall + (start_s + k * bin_s) * dilation) for k in range(n + 1)]
    return [(start_s + k * bin_s, (edges[k + 1][0] - edges[k][0]) * 8 / bin_s,
             (edges[k + 1][1] - edges[k][1]) * 8 / bin_s) for k in range(n)]


def shares(bins: list[tuple[float, float, float]], link_bps: float, idle_below: float = IDLE_BELOW,
           busy_above: float = BUSY_ABOVE) -> dict[str, float]:
    """idle_share, tx_idle_share, overlap_share, tx_util, rx_util of ``bins`` (see the module docstring)."""
    if not bins:
        raise ValueError("no bins to measure")
    if not link_bps > 0:
        raise ValueError(f"link rate must be positive, got {link_bps}")
    n = len(bins)
    lo, hi = idle_below * link_bps, busy_above * link_bps
    return {
        "idle_share": sum(tx < lo and rx < lo for _, tx, rx in bins) / n,
        "tx_idle_share": sum(tx < lo for _, tx, _ in bins) / n,
        "overlap_share": sum(tx > hi and rx > hi for _, tx, rx in bins) / n,
        "tx_util": sum(tx for _, tx, _ in bins) / n / link_bps,
        "rx_util": sum(rx for _, _, rx in bins) / n / link_bps,
    }


def first_payload_wall(files: Iterable[Iterable[Mapping[str, str]]]) -> float:
    """Host wall time of the first payload byte of the job: the middle of the earliest bin, over all nodes,
    whose payload counters left zero (the bin is 10 ms of host time, so this is within 5 ms)."""
    best = None
    for rows in files:
        prev = None
        for r in rows:
            wall = float(r["wall_time"])
            if float(r["tx_bytes"]) > 0 or float(r["rx_bytes"]) > 0:
                start = wall - float(r["t_s"]) if prev is None else prev
                mid = (start + wall) / 2
                best = mid if best is None or mid < best else best
                break
            prev = wall
    if best is None:
        raise ValueError("no payload traffic in any traffic file")
    return best


def iteration_ends(span_rows: Iterable[Mapping[str, str]]) -> dict[int, float]:
    """Emulated time at which the last byte of each iteration (>= 1) arrived, from spans.csv rows."""
    ends: dict[int, float] = {}
    for r in span_rows:
        it = int(r["iteration"])
        if it >= 1:
            ends[it] = max(ends.get(it, 0.0), float(r["end_s"]))
    return ends


def _read(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def machine_utilization(run_dir: Path, summary: Mapping[str, Any], dilation: float,
                        trace_s: float = 2.0) -> tuple[dict[str, Any], dict[str, Any]]:
    """Metrics and extras (a ``trace_s`` long 10 ms trace, per-iteration shares) of worker machine 0.

    The machine is worker0 plus, when co-located (its spec's ``cluster.colocate_ps``), ps0."""
    run_dir = Path(run_dir)
    traffic = {p.stem.removeprefix("traffic-"): p for p in sorted(run_dir.glob("traffic-*.csv"))}
    if "worker0" not in traffic:
        raise ValueError(f"{run_dir}: no traffic-worker0.csv")
    link = summary.get("link_rate_bps")
    if not link:
        raise ValueError(f"{run_dir}: summary.json has no link_rate_bps (an unshaped link has no utilization)")
    rows = {n: _read(p) for n, p in traffic.items()}
    spec_path = run_dir / "spec.yaml"
    colocated = False
    if spec_path.exists():
        import yaml

        colocated = bool(((yaml.safe_load(spec_path.read_text()) or {}).get("cluster") or {}).get("colocate_ps"))
    nodes = ["worker0"] + (["ps0"] if colocated and "ps0" in rows else [])
    counter, source = machine_counter({n: rows[n] for n in nodes})

    spans = iteration_ends(_read(run_dir / "spans.csv")) if (run_dir / "spans.csv").exists() else {}
    span_min = 0.0
    if (run_dir / "spans.csv").exists():
        span_min = min((float(r["start_s"]) for r in _read(run_dir / "spans.csv")), default=0.0)
    t0 = first_payload_wall(rows.values()) - span_min * dilation
    warmup, total = int(summary.get("warmup") or 0), int(summary.get("iterations") or 0)
    if total in spans and (warmup == 0 or warmup in spans):
        start, end = (spans[warmup] if warmup else 0.0), spans[total]
        window = f"iterations {warmup + 1}-{total} (last byte of iteration {warmup} to last byte of {total})"
        cuts = [spans[i] for i in range(warmup, total + 1) if i in spans] if warmup else []
    else:  # no per-iteration spans: the whole trace after the first payload byte
        start, end = 0.0, (counter.wall[-1] - t0) / dilation
        window, cuts = "whole run (spans.csv lacks the iterations)", []
    bins = emulated_bins(counter, t0, start, end, dilation)
    metrics: dict[str, Any] = {**shares(bins, link), "util_bins": len(bins)}
    per_it = []
    for a, b in zip(cuts, cuts[1:]):
        part = [x for x in bins if a <= x[0] + BIN_S / 2 < b]  # by the bin's middle
        if part:
            per_it.append(shares(part, link))
    if len(per_it) >= 2:
        for k in ("idle_share", "overlap_share"):
            metrics[f"{k}_iter_sd"] = statistics.stdev(p[k] for p in per_it)
    trace = bins[: int(round(trace_s / BIN_S))]
    extra = {"util_source": source, "util_nodes": nodes, "util_window": window, "util_link_bps": link,
             "util_per_iteration": per_it, "trace_bin_s": BIN_S,
             "trace_t_s": [round(t - start, 4) for t, _, _ in trace],
             "trace_tx_gbps": [round(tx / 1e9, 4) for _, tx, _ in trace],
             "trace_rx_gbps": [round(rx / 1e9, 4) for _, _, rx in trace]}
    return metrics, extra
