"""PNG figures of a run, drawn only from its run records.

Figures are built on :class:`matplotlib.figure.Figure` directly, not pyplot:
no global figure state, so reports can be drawn from any thread and nothing
switches the process-wide backend.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

from synclab.report.records import (
    IterationRow,
    RunRecords,
    iteration_phases,
    load_run,
    measured_iterations,
    summary_calibration,
    traffic_file,
)

DPI = 120
TX_COLOR, RX_COLOR = "tab:blue", "tab:orange"


def _title(run: RunRecords) -> str:
    s = run.summary
    rate = s.get("link_rate_bps")
    link = f"{rate / 1e9:g} Gbit/s" if rate else "unshaped"
    return (f"{s.get('strategy', '?')} · {s.get('model', '?')} · {s.get('workers', '?')} worker(s) · "
            f"{link} ({s.get('network_backend', '?')})")


def _save(fig: Figure, out_png: str | Path) -> Path:
    out = Path(out_png)
    fig.savefig(out, dpi=DPI)
    return out


def _measured(run: RunRecords) -> list[IterationRow]:
    """The rows of the iterations compute_summary's figures cover (no warm-up, no calibration); all rows if
    that leaves none."""
    kept = set(measured_iterations({r.iteration for r in run.iterations}, int(run.summary.get("warmup") or 0),
                                   summary_calibration(run.summary))[0])
    return [r for r in run.iterations if r.iteration in kept] or run.iterations


def _shade_unmeasured(ax, run: RunRecords, its: list[int]) -> None:
    """Grey spans over the warm-up and calibration iterations among ``its`` (iteration_phases)."""
    phases = iteration_phases(its, int(run.summary.get("warmup") or 0), summary_calibration(run.summary))
    for phase, colour, label in (("warmup", "grey", "warm-up"), ("calibration", "tab:orange", "calibration")):
        marked = [i for i in its if phases.get(i) == phase]
        for n, i in enumerate(marked):
            ax.axvspan(i - 0.5, i + 0.5, color=colour, alpha=0.15, lw=0, label=label if n == 0 else None)


def plot_throughput(run: RunRecords, out_png: str | Path) -> Path:
    """Samples/s of every iteration: one line per worker (its samples / its iteration_s) and the cluster
    (all workers' samples / the slowest worker's iteration_s), warm-up and calibration shaded."""
    by_rank: dict[int, list[IterationRow]] = {}
    by_it: dict[int, list[IterationRow]] = {}
    for r in run.iterations:
        by_rank.setdefault(r.rank, []).append(r)
        by_it.setdefault(r.iteration, []).append(r)
    fig = Figure(figsize=(8, 4), layout="tight")
    ax = fig.add_subplot()
    for rank in sorted(by_rank):
        rows = sorted(by_rank[rank], key=lambda r: r.iteration)
        ax.plot([r.iteration for r in rows], [r.samples / r.iteration_s if r.iteration_s > 0 else np.nan for r in rows],
                lw=1, alpha=0.6, label=f"worker{rank}")
    its = sorted(by_it)
    cluster = [sum(r.samples for r in by_it[i]) / max(r.iteration_s for r in by_it[i]) for i in its]
    ax.plot(its, cluster, lw=2, color="black", label="cluster")
    _shade_unmeasured(ax, run, its)
    if run.summary.get("throughput_samples_per_s"):
        ax.axhline(run.summary["throughput_samples_per_s"], ls=":", color="black", lw=1, label="cluster (summary)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_ylim(bottom=0)
    ax.set_title(_title(run), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out_png)


def plot_traffic(run: RunRecords, node: str, out_png: str | Path,
                 window: tuple[float, float] | None = None) -> Path:
    """tx and rx bandwidth (Gbit/s) of one node over time, in the sampler's bins (P3 Fig. 8/9).

    Two stacked panels; each bin is drawn as a step over its own length.
    Application-level bytes are filled; the wire-level interface counters are
    a thin line when recorded. The configured link rate (``link_rate_bps`` in
    summary.json) is a dashed line. ``window`` = (start_s, end_s) in the trace's
    time (seconds since the node's sampler started) zooms in.
    """
    trace = run.traffic.get(node)
    if trace is None:
        raise FileNotFoundError(f"{run.run_dir / traffic_file(node)} is missing: no traffic trace for {node!r} "
                                f"(traces: {', '.join(sorted(run.traffic)) or 'none'})")
    if window is not None and not window[0] < window[1]:
        raise ValueError(f"window must be (start_s, end_s) with start_s < end_s, got {window}")
    t = trace.t_s
    series = {"tx": trace.tx_bps / 1e9, "rx": trace.rx_bps / 1e9}
    wire = dict(zip(("tx", "rx"), (b / 1e9 for b in trace.wire_bps()))) if trace.has_wire else {}
    keep = np.ones(len(t), dtype=bool) if window is None else (t > window[0]) & (t <= window[1])
    bins_ms = float(np.median(np.diff(t))) * 1e3 if len(t) > 1 else None
    rate = run.summary.get("link_rate_bps")

    fig = Figure(figsize=(9, 5), layout="tight")
    axes = fig.subplots(2, 1, sharex=True)
    for ax, direction, color in ((axes[0], "tx", TX_COLOR), (axes[1], "rx", RX_COLOR)):
        ax.fill_between(t[keep], series[direction][keep], step="pre", color=color, alpha=0.5, lw=0,
                        label="application")
        if direction in wire:
            ax.step(t[keep], wire[direction][keep], where="pre", color=color, lw=0.7, label="wire")
        if rate:
            ax.axhline(rate / 1e9, ls="--", color="black", lw=1, label="configured link rate")
        ax.set_ylabel(f"{direction} (Gbit/s)")
        ax.set_ylim(bottom=0)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8, loc="upper right")
        if window is not None:
            ax.set_xlim(*window)
    axes[1].set_xlabel("time (s)" + (f", {bins_ms:.0f} ms bins" if bins_ms else ""))
    axes[0].set_title(f"{node} network utilization — {_title(run)}", fontsize=9)
    return _save(fig, out_png)


def plot_comp_comm(run: RunRecords, out_png: str | Path) -> Path:
    """Mean computation and non-overlapped communication per iteration of every worker, stacked
    (MG-WFBP Fig. 8/9), over the measured (non-warm-up) iterations."""
    by_rank: dict[int, list[IterationRow]] = {}
    for r in _measured(run):
        by_rank.setdefault(r.rank, []).append(r)
    ranks = sorted(by_rank)
    comp = [float(np.mean([r.compute_s for r in by_rank[k]])) for k in ranks]
    wait = [float(np.mean([r.comm_wait_s for r in by_rank[k]])) for k in ranks]
    labels = [f"worker{k}" for k in ranks]
    fig = Figure(figsize=(max(4.0, 1.2 * len(ranks) + 2), 4), layout="tight")
    ax = fig.add_subplot()
    ax.bar(labels, comp, label="computation")
    ax.bar(labels, wait, bottom=comp, label="non-overlapped communication")
    top = max((c + w for c, w in zip(comp, wait)), default=0.0)
    if top > 0:
        ax.set_ylim(0, top * 1.3)  # room for the legend above the bars
    ax.set_ylabel("time per iteration (s)")
    ax.set_title(_title(run), fontsize=9)
    ax.legend(fontsize=8)
    return _save(fig, out_png)


def plot_overlap(run: RunRecords, rows: list[dict], out_png: str | Path) -> Path:
    """Per iteration: each worker's seconds on the wire (bars: hidden behind compute, and not) and the
    share hidden (line), from ``overlap.csv`` (see :mod:`synclab.report.overlap`)."""
    by_it: dict[int, list[dict]] = {}
    for r in rows:
        by_it.setdefault(r["iteration"], []).append(r)
    its = sorted(by_it)
    talk = np.array([np.mean([r["communicating_s"] for r in by_it[i]]) for i in its])
    hid = np.array([np.mean([r["overlapped_s"] for r in by_it[i]]) for i in its])
    fig = Figure(figsize=(8, 4), layout="tight")
    ax = fig.add_subplot()
    ax.bar(its, hid, label="on the wire, compute running (hidden)", color="tab:green")
    ax.bar(its, talk - hid, bottom=hid, label="on the wire, no compute (exposed)", color="tab:red", alpha=0.7)
    ax.set_xlabel("iteration")
    ax.set_ylabel("communication per worker (s, mean)")
    share = ax.twinx()
    with np.errstate(all="ignore"):
        share.plot(its, np.where(talk > 0, hid / np.where(talk > 0, talk, 1), np.nan) * 100, "k.-",
                   label="communication hidden (%)")
    share.set_ylim(0, 105)
    share.set_ylabel("communication hidden (%)")
    _shade_unmeasured(ax, run, [int(i) for i in its])
    ax.legend(fontsize=8, loc="upper left")
    share.legend(fontsize=8, loc="upper right")
    ax.set_title(_title(run), fontsize=9)
    return _save(fig, out_png)


def plot_loss(run: RunRecords, out_png: str | Path) -> Path:
    """Training loss per iteration: every worker faint, their mean bold."""
    by_rank: dict[int, list[IterationRow]] = {}
    by_it: dict[int, list[float]] = {}
    for r in run.iterations:
        by_rank.setdefault(r.rank, []).append(r)
        by_it.setdefault(r.iteration, []).append(r.loss)
    fig = Figure(figsize=(8, 4), layout="tight")
    ax = fig.add_subplot()
    for rank in sorted(by_rank):
        rows = sorted(by_rank[rank], key=lambda r: r.iteration)
        ax.plot([r.iteration for r in rows], [r.loss for r in rows], lw=0.8, alpha=0.4, label=f"worker{rank}")
    its = sorted(by_it)
    with np.errstate(all="ignore"):
        mean = [float(np.nanmean(by_it[i])) if not np.isnan(by_it[i]).all() else np.nan for i in its]
    ax.plot(its, mean, lw=2, color="black", label="mean")
    ax.set_xlabel("iteration")
    ax.set_ylabel("training loss")
    ax.set_title(_title(run), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return _save(fig, out_png)


def write_report(run_dir: str | Path) -> list[Path]:
    """Draw every figure of a run into its directory and return their paths:
    ``throughput.png``, ``comp-comm.png``, ``loss.png``, ``overlap.png`` when the run communicated
    (``overlap.csv``), ``traffic-<worker>.png`` for the first worker with a traffic trace (worker0
    normally) and ``timeline.png``."""
    from synclab.report.overlap import read_overlap

    run = load_run(run_dir)
    d = run.run_dir
    out = [plot_throughput(run, d / "throughput.png"), plot_comp_comm(run, d / "comp-comm.png"),
           plot_loss(run, d / "loss.png")]
    overlap = read_overlap(d / "overlap.csv") if (d / "overlap.csv").exists() else []
    if any(r["communicating_s"] > 0 for r in overlap):
        out.append(plot_overlap(run, overlap, d / "overlap.png"))
    if run.workers:
        w = run.workers[0]
        out.append(plot_traffic(run, w, d / f"traffic-{w}.png"))
    from synclab.report.timeline import plot_timeline

    timeline = plot_timeline(d, d / "timeline.png")
    if timeline is not None:
        out.append(timeline)
    return out
