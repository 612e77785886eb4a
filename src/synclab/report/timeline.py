"""A timeline of one iteration from ``events.csv``, like MG-WFBP Fig. 1 and P3 Fig. 4.

One row per tensor (backward order: the first gradient ready at the top) for one worker: a
dot where backward produced its gradient, a bar from ``send_start`` to
``send_end`` (its communication), and a tick where its parameters became fresh
for the next forward pass. Overlap of communication with backward, merging
(MG-WFBP) and priority order (P3) are visible at a glance.
"""

from __future__ import annotations

import csv
from pathlib import Path

from matplotlib.figure import Figure


def read_events(run_dir: Path) -> list[dict]:
    path = Path(run_dir) / "events.csv"
    if not path.is_file():
        return []
    with path.open() as f:
        rows = list(csv.DictReader(f))
    for r in rows:
        r["iteration"] = int(r["iteration"])
        r["time_s"] = float(r["time_s"])
    return rows


def plot_timeline(run_dir: str | Path, out_png: str | Path, *, node: str = "worker0",
                  iteration: int | None = None) -> Path | None:
    """Draw one iteration of ``node`` (default: the middle iteration); None when there are no events."""
    rows = [r for r in read_events(Path(run_dir)) if r["node"] == node]
    if not rows:
        return None
    its = sorted({r["iteration"] for r in rows})
    it = iteration if iteration is not None else its[len(its) // 2]
    rows = [r for r in rows if r["iteration"] == it]
    ready = {r["tensor"]: r["time_s"] for r in rows if r["event"] == "grad_ready"}
    order = sorted({r["tensor"] for r in rows}, key=lambda t: ready.get(t, float("inf")))  # backward order
    t0 = min(r["time_s"] for r in rows)
    y = {t: i for i, t in enumerate(order)}
    fig = Figure(figsize=(9, max(3.0, 0.22 * len(order) + 1.2)))
    ax = fig.add_subplot()
    starts: dict[str, float] = {}
    for r in rows:
        t, x = r["tensor"], (r["time_s"] - t0) * 1e3
        if r["event"] == "grad_ready":
            ax.plot(x, y[t], "o", color="tab:green", ms=3, label="gradient ready")
        elif r["event"] == "send_start":
            starts[t] = x
        elif r["event"] == "send_end" and t in starts:
            ax.barh(y[t], x - starts[t], left=starts[t], height=0.6, color="tab:blue", alpha=0.7,
                    label="communication")
        elif r["event"] == "params_fresh":
            ax.plot(x, y[t], "|", color="tab:red", ms=8, label="params fresh")
    handles, labels = ax.get_legend_handles_labels()
    uniq = dict(zip(labels, handles))
    ax.legend(uniq.values(), uniq.keys(), fontsize=8, loc="best")
    ax.set_yticks(range(len(order)), order, fontsize=6)
    ax.set_xlabel(f"time since the first event of iteration {it} (ms)")
    ax.set_title(f"{node}, iteration {it}: backward, communication and parameter refresh per tensor", fontsize=9)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    out = Path(out_png)
    fig.savefig(out, dpi=120)
    return out
