"""PNG plots from run records (matplotlib, Agg)."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from synclab.report.records import RunRecords  # noqa: E402


def _title(run: RunRecords) -> str:
    s = run.summary
    rate = s.get("link_rate_bps")
    link = f"{rate / 1e9:g} Gbit/s ({s.get('network_backend')})" if rate else f"unshaped ({s.get('network_backend')})"
    return f"{s.get('strategy')} · {s.get('model')} · {s.get('workers')} workers · {link}"


def plot_throughput(run: RunRecords, out_png: Path) -> Path:
    """Samples/s per iteration, per worker and for the cluster (slowest worker's pace)."""
    fig, ax = plt.subplots(figsize=(8, 4))
    by_rank: dict[int, list[tuple[int, float]]] = {}
    by_it: dict[int, list[dict]] = {}
    for r in run.iterations:
        it = int(r["iteration"])
        by_rank.setdefault(int(r["rank"]), []).append((it, int(r["samples"]) / float(r["iteration_s"])))
        by_it.setdefault(it, []).append(r)
    for rank, pts in sorted(by_rank.items()):
        pts.sort()
        ax.plot([p[0] for p in pts], [p[1] for p in pts], lw=1, alpha=0.6, label=f"worker{rank}")
    its = sorted(by_it)
    cluster = [sum(int(x["samples"]) for x in by_it[i]) / max(float(x["iteration_s"]) for x in by_it[i]) for i in its]
    ax.plot(its, cluster, lw=2, color="black", label="cluster")
    warm = run.summary.get("warmup", 0)
    if warm:
        ax.axvspan(0.5, warm + 0.5, color="grey", alpha=0.15, label="warm-up")
    ax.set_xlabel("iteration")
    ax.set_ylabel("throughput (samples/s)")
    ax.set_title(_title(run), fontsize=9)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def plot_traffic(run: RunRecords, node: str, out_png: Path, window: tuple[float, float] | None = None) -> Path:
    """tx and rx bandwidth of one node over time in 10 ms bins, like P3 Fig. 8/9."""
    rows = run.traffic[node]
    t = [float(r["t_s"]) for r in rows]
    tx = [float(r["tx_bps"]) / 1e9 for r in rows]
    rx = [float(r["rx_bps"]) / 1e9 for r in rows]
    fig, axes = plt.subplots(2, 1, figsize=(9, 5), sharex=True)
    rate = run.summary.get("link_rate_bps")
    for ax, series, label in ((axes[0], tx, "tx"), (axes[1], rx, "rx")):
        ax.plot(t, series, lw=0.7, color="tab:blue" if label == "tx" else "tab:orange")
        if rate:
            ax.axhline(rate / 1e9, ls="--", color="black", lw=1, label="configured link rate")
            ax.legend(fontsize=8, loc="upper right")
        ax.set_ylabel(f"{label} (Gbit/s)")
        ax.grid(alpha=0.3)
        if window:
            ax.set_xlim(*window)
    axes[1].set_xlabel("time (s), 10 ms bins")
    axes[0].set_title(f"{node} network utilization — {_title(run)}", fontsize=9)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png


def plot_comp_comm(run: RunRecords, out_png: Path) -> Path:
    """Mean compute vs non-overlapped communication per iteration, per worker (MG-WFBP Fig. 8 style)."""
    warm = run.summary.get("warmup", 0)
    by_rank: dict[int, list[dict]] = {}
    for r in run.iterations:
        if int(r["iteration"]) > warm:
            by_rank.setdefault(int(r["rank"]), []).append(r)
    ranks = sorted(by_rank)
    comp = [sum(float(x["compute_s"]) for x in by_rank[k]) / len(by_rank[k]) for k in ranks]
    wait = [sum(float(x["comm_wait_s"]) for x in by_rank[k]) / len(by_rank[k]) for k in ranks]
    fig, ax = plt.subplots(figsize=(6, 4))
    labels = [f"worker{k}" for k in ranks]
    ax.bar(labels, comp, label="computation")
    ax.bar(labels, wait, bottom=comp, label="non-overlapped communication")
    ax.set_ylabel("time per iteration (s)")
    ax.set_title(_title(run), fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(out_png, dpi=120)
    plt.close(fig)
    return out_png
