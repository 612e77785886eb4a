"""Tables and plots from run records."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from synclab.report.plots import plot_comp_comm, plot_throughput, plot_traffic
from synclab.report.records import RunRecords, compute_summary, load_run

__all__ = ["RunRecords", "compute_summary", "load_run", "plot_comp_comm", "plot_throughput", "plot_traffic",
           "summary_table", "write_report"]


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000:
            return f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} PB"


def summary_table(run: RunRecords) -> Table:
    s = run.summary
    t = Table(title=f"SyncLab run {run.run_dir.name}", show_header=False)
    t.add_column("key", style="bold")
    t.add_column("value")
    it = s["iteration_seconds"]
    rows = [
        ("strategy", s.get("strategy")), ("model", f"{s.get('model')} (batch {s.get('batch_size')}/worker)"),
        ("cluster", f"{s.get('workers')} worker(s), {s.get('ps_shards')} PS shard(s)"),
        ("network", f"{s.get('network_backend')}" + (f", {s['link_rate_bps'] / 1e9:g} Gbit/s"
                                                     if s.get("link_rate_bps") else ", unshaped")),
        ("iterations", f"{s.get('iterations')} ({s.get('warmup')} warm-up)"),
        ("throughput", f"{s['throughput_samples_per_s']:.1f} samples/s"),
        ("iteration time", f"mean {it['mean'] * 1e3:.1f} ms, p50 {it['p50'] * 1e3:.1f} ms, p99 {it['p99'] * 1e3:.1f} ms"),
        ("compute / non-overlapped comm",
         f"{s['compute_seconds_mean'] * 1e3:.1f} ms / {s['comm_wait_seconds_mean'] * 1e3:.1f} ms per iteration"),
    ]
    if s.get("overlap_fraction") is not None:
        rows.append(("communication hidden", f"{s['overlap_fraction'] * 100:.0f}% of a "
                                             f"{s['comm_span_seconds_mean'] * 1e3:.1f} ms span"))
    rows += [("loss", f"{s.get('initial_loss'):.4f} → {s.get('final_loss'):.4f}"),
             ("bytes sent", ", ".join(f"{n} {_fmt_bytes(b)}" for n, b in s.get("bytes_sent", {}).items()))]
    for k, v in rows:
        t.add_row(k, str(v))
    return t


def write_report(run_dir: str | Path) -> list[Path]:
    """Write throughput.png, traffic-<worker0>.png and comp-comm.png into the run directory."""
    run = load_run(run_dir)
    out = [plot_throughput(run, run.run_dir / "throughput.png"), plot_comp_comm(run, run.run_dir / "comp-comm.png")]
    if run.workers:
        w = run.workers[0]
        out.append(plot_traffic(run, w, run.run_dir / f"traffic-{w}.png"))
    return out
