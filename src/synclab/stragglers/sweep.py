"""One slow worker, many strategies: simulated throughput against the straggler's compute factor.

For each strategy and each factor *f*, the spec is simulated with ``cluster.slowdown`` giving the last
worker *f* (the others 1). ``relative`` is the throughput over the same strategy's at *f* = 1. Two
references bound what a strategy can lose: a lockstep strategy whose iteration is all compute slows to
the straggler's pace, ``1 / f``; workers that never wait for each other lose only the straggler's own
share, ``(N - 1 + 1/f) / N``. Writes ``stragglers.csv`` and ``stragglers.png``.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from pathlib import Path
from typing import Any

COLUMNS = ("strategy", "factor", "workers", "throughput_samples_per_s", "iteration_mean_s", "relative",
           "lockstep_bound", "independent_bound", "slow_worker_compute_s", "others_wait_for_slow_s")


def sweep(spec_file: Path, strategies: list[str], factors: list[float], *, overrides: list[str] = (),
          on_point: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Simulate every (strategy, factor); one row per point (:data:`COLUMNS`)."""
    from synclab.sim.records import summary_of
    from synclab.sim.run import load_for_simulation, simulate

    if not factors or any(f <= 0 for f in factors):
        raise ValueError(f"factors must be > 0, got {factors}")
    grid = sorted(set([1.0, *factors]))
    rows = []
    for name in strategies:
        base = None
        for f in grid:
            spec, workers = load_for_simulation(spec_file, [*overrides, f"strategy.name={name}"])
            n = workers or spec.cluster.workers
            slow = [1.0] * (n - 1) + [f]
            spec, workers = load_for_simulation(spec_file, [*overrides, f"strategy.name={name}",
                                                            f"cluster.slowdown={slow}"])
            s = summary_of(simulate(spec, workers=workers, record_events=False))
            thr = s["throughput_samples_per_s"]
            base = thr if f == 1.0 else base
            pw = s.get("per_worker", {})
            last = f"worker{n - 1}"
            waited = sum(w["waited_for"].get(last, 0.0) for k, w in pw.items() if k != last)
            row = {"strategy": name, "factor": f, "workers": n, "throughput_samples_per_s": thr,
                   "iteration_mean_s": s["iteration_seconds"]["mean"], "relative": thr / base,
                   "lockstep_bound": 1 / f, "independent_bound": (n - 1 + 1 / f) / n,
                   "slow_worker_compute_s": pw.get(last, {}).get("compute_s"), "others_wait_for_slow_s": waited}
            rows.append(row)
            if on_point is not None:
                on_point(row)
    return rows


def write(rows: list[dict[str, Any]], out: Path, title: str = "") -> tuple[Path, Path]:
    """``stragglers.csv`` and ``stragglers.png`` (relative throughput against the factor, both bounds)."""
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out / "stragglers.csv", out / "stragglers.png"
    with csv_path.open("w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(COLUMNS))
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else v) for k, v in r.items()})
    fig = Figure(figsize=(6.4, 4.2))
    ax = fig.add_subplot()
    names = list(dict.fromkeys(r["strategy"] for r in rows))
    for name in names:
        pts = [r for r in rows if r["strategy"] == name]
        ax.plot([r["factor"] for r in pts], [r["relative"] for r in pts], "o-", label=name)
    grid = sorted({r["factor"] for r in rows})
    n = rows[0]["workers"]
    ax.plot(grid, [1 / f for f in grid], "k--", lw=1, label="1/f (lockstep, all compute)")
    ax.plot(grid, [(n - 1 + 1 / f) / n for f in grid], "k:", lw=1, label=f"(N-1+1/f)/N, N={n} (no waiting)")
    ax.set_xlabel("compute factor f of one worker")
    ax.set_ylabel("throughput / throughput at f = 1 (simulated)")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title(title or "one slow worker", fontsize=9)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    return csv_path, png_path
