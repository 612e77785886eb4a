"""Reading run records and the figures computed from them (every number a report shows comes from here)."""

from __future__ import annotations

import csv
import json
import statistics
from dataclasses import dataclass, field
from pathlib import Path


def _percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (q in [0, 100])."""
    v = sorted(values)
    if len(v) == 1:
        return v[0]
    pos = (len(v) - 1) * q / 100
    lo = int(pos)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def compute_summary(rows: list[dict], warmup: int = 0) -> dict:
    """Cluster figures from iteration rows (one per worker per iteration; iterations count from 1).

    Warm-up iterations (``iteration <= warmup``) are left out. The cluster's
    iteration time is the slowest worker's ``iteration_s`` for that iteration
    (synchronous training moves at the pace of the slowest worker); throughput =
    all workers' samples over all measured iterations / the sum of those times.
    Compute, non-overlapped communication and communication span are means over
    workers and measured iterations; ``overlap_fraction`` = 1 − comm_wait/comm_span
    is the share of communication hidden behind compute.
    """
    by_it: dict[int, list[dict]] = {}
    for r in rows:
        if int(r["iteration"]) > warmup:
            by_it.setdefault(int(r["iteration"]), []).append(r)
    if not by_it:
        raise ValueError(f"no iterations after the {warmup} warm-up iteration(s)")
    cluster = [max(float(x["iteration_s"]) for x in v) for v in by_it.values()]
    samples = sum(int(x["samples"]) for v in by_it.values() for x in v)
    measured = [x for v in by_it.values() for x in v]
    mean = lambda key: statistics.fmean(float(x[key]) for x in measured)  # noqa: E731
    out = {
        "measured_iterations": len(by_it),
        "throughput_samples_per_s": samples / sum(cluster),
        "iteration_seconds": {"mean": statistics.fmean(cluster), "p50": _percentile(cluster, 50),
                              "p99": _percentile(cluster, 99), "min": min(cluster), "max": max(cluster)},
        "compute_seconds_mean": mean("compute_s"),
        "comm_wait_seconds_mean": mean("comm_wait_s"),
    }
    if all(x.get("comm_span_s") not in (None, "") for x in measured):
        span = mean("comm_span_s")
        out["comm_span_seconds_mean"] = span
        out["overlap_fraction"] = max(0.0, 1 - out["comm_wait_seconds_mean"] / span) if span > 0 else None
    return out


@dataclass
class RunRecords:
    run_dir: Path
    summary: dict
    iterations: list[dict]
    traffic: dict[str, list[dict]] = field(default_factory=dict)

    @property
    def workers(self) -> list[str]:
        return sorted((n for n in self.traffic if n.startswith("worker")), key=lambda n: int(n[6:] or 0))


def _read_csv(path: Path) -> list[dict]:
    with path.open() as f:
        return list(csv.DictReader(f))


def load_run(run_dir: str | Path) -> RunRecords:
    run_dir = Path(run_dir)
    for name in ("summary.json", "iterations.csv"):
        if not (run_dir / name).is_file():
            raise FileNotFoundError(f"{run_dir / name} is missing: is {run_dir} a finished SyncLab run directory?")
    summary = json.loads((run_dir / "summary.json").read_text())
    iterations = _read_csv(run_dir / "iterations.csv")
    traffic = {p.stem.removeprefix("traffic-"): _read_csv(p) for p in sorted(run_dir.glob("traffic-*.csv"))}
    return RunRecords(run_dir, summary, iterations, traffic)
