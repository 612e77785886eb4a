"""The target's PNG in the paper's layout, SyncLab's measured points with the paper's numbers beside
them where the text gives them (hollow black markers / dashed lines labelled "paper")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synclab.reproduce.repeats import spread
from synclab.reproduce.schema import Target


def _num(v: Any) -> float:
    """An axis value as a number; rates such as '2667mbit' become Gbit/s."""
    try:
        return float(v)
    except (TypeError, ValueError):
        from synclab.units import parse_rate_bps

        return parse_rate_bps(str(v)) / 1e9


def _series(target: Target, records: list[dict[str, Any]], metric: str) -> dict[str, list[tuple[float, float]]]:
    f = target.figure_spec
    series: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        y = r["metrics"].get(metric)
        if y is None:
            continue
        name = (" ".join(str(r["values"].get(k.strip(), "")) for k in f.series.split(",")) if f.series
                else "SyncLab")  # several axis keys, comma-separated: one line per combination
        series.setdefault(name, []).append((_num(r["values"][f.x]), float(y)))
    return series


def _spreads(target: Target, records: list[dict[str, Any]], metric: str) -> dict[str, list[tuple[float, ...]]]:
    """(x, min, max) of ``metric`` over each repeated point's repeats, by series (as :func:`_series`)."""
    repeated = [r for r in records if spread(r, metric) is not None]
    lows = _series(target, [{**r, "metrics": {metric: spread(r, metric)[0]}} for r in repeated], metric)
    highs = _series(target, [{**r, "metrics": {metric: spread(r, metric)[1]}} for r in repeated], metric)
    return {name: [(x, lo, hi) for (x, lo), (_, hi) in zip(pts, highs[name], strict=True)]
            for name, pts in lows.items()}


def _lines(ax, target: Target, records: list[dict[str, Any]]) -> None:
    f = target.figure_spec
    colors = {}
    spreads = _spreads(target, records, f.y)
    for name, pts in sorted(_series(target, records, f.y).items()):
        pts.sort()
        (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=f"{name} (SyncLab)")
        colors[name] = line.get_color()
        if spreads.get(name):  # a repeated point's range over its repeats (the marker is their mean)
            ax.vlines([x for x, _, _ in spreads[name]], [lo for _, lo, _ in spreads[name]],
                      [hi for _, _, hi in spreads[name]], color=colors[name], lw=2.5, alpha=0.5)
    for metric in f.also:  # e.g. a model's prediction of the same quantity: dashed, in the series' colour
        for name, pts in sorted(_series(target, records, metric).items()):
            pts.sort()
            ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="--", marker="x",
                    color=colors.get(name), label=f"{name} ({metric})")
    if target.mixed:  # a target with per-point engines (when.engine): its simulated points as filled diamonds
        sim = [r for r in records if r.get("engine") == "simulate"]
        for k, (name, pts) in enumerate(sorted(_series(target, sim, f.y).items())):
            ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="none", marker="D", markersize=8,
                    markeredgecolor="black", color=colors.get(name), label=None if k else "simulated point (synclab.sim)")
    for name in sorted({p.series for p in f.paper_points}):
        pts = sorted((p.x, p.y) for p in f.paper_points if p.series == name)
        ax.plot([x for x, _ in pts], [y for _, y in pts], linestyle="none", marker="s", markersize=8,
                markerfacecolor="none", color=colors.get(name, "black"), label=f"{name} (paper)")


def _fit(ax, target: Target, records: list[dict[str, Any]]) -> None:
    import numpy as np

    f = target.figure_spec
    lo, hi = 1e3, 1e8
    for r in records:
        sizes, medians = r.get("extra", {}).get("fit_sizes_bytes"), r.get("extra", {}).get("fit_median_s")
        m = r["metrics"]
        if not sizes or m.get("fit_a_s") is None:
            continue
        label = ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in r["values"].items())
        (pts,) = ax.plot(sizes, medians, marker="o", linestyle="none", label=f"SyncLab {label} (medians)")
        xs = np.geomspace(min(sizes), max(sizes), 50)
        ax.plot(xs, m["fit_a_s"] + m["fit_b_s_per_byte"] * xs, color=pts.get_color(),
                label=f"fit a={m['fit_a_s'] * 1e3:.2f} ms, b={m['fit_b_s_per_byte']:.2e} s/B")
        lo, hi = min(lo, min(sizes)), max(hi, max(sizes))
    xs = np.geomspace(lo, hi, 50)
    for label, (a, b) in f.paper_lines.items():
        ax.plot(xs, a + b * xs, linestyle="--", label=f"paper {label}: a={a * 1e3:.3g} ms, b={b:.3g} s/B")


def _label(values: dict[str, Any]) -> str:
    return ", ".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in values.items())


def _traffic(fig, target: Target, records: list[dict[str, Any]]) -> None:
    """P3 Fig. 8/9: grouped bars of the utilization shares per point (top) and, below, each point's 10 ms tx/rx
    trace of worker machine 0 in emulated time (records' ``extra`` trace_*), the link rate dashed."""
    f = target.figure_spec
    metrics = [f.y, *(m for m in f.bars if m != f.y)]
    traced = [r for r in records if r.get("extra", {}).get("trace_t_s")]
    grid = fig.add_gridspec(1 + len(traced), 1, height_ratios=[1.3] + [1] * len(traced))
    ax = fig.add_subplot(grid[0])
    width = 0.8 / max(1, len(records))
    for i, r in enumerate(records):
        ys = [r["metrics"].get(m) for m in metrics]
        xs = [k + (i - (len(records) - 1) / 2) * width for k in range(len(metrics))]
        bars = ax.bar(xs, [0.0 if y is None else float(y) for y in ys], width, label=_label(r["values"]))
        for b, y in zip(bars, ys, strict=True):
            ax.annotate("n/a" if y is None else f"{float(y):.2f}", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(range(len(metrics)), metrics, fontsize=8)
    ax.set_ylim(0, 1.1)
    ax.set_ylabel(f.ylabel or "share")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)
    first = None
    for k, r in enumerate(traced):
        e = r["extra"]
        ax = fig.add_subplot(grid[1 + k], sharex=first, sharey=first)
        first = first or ax
        ax.step(e["trace_t_s"], e["trace_tx_gbps"], where="post", lw=0.9, label="outbound (tx)")
        ax.step(e["trace_t_s"], e["trace_rx_gbps"], where="post", lw=0.9, label="inbound (rx)", alpha=0.8)
        if e.get("util_link_bps"):
            ax.axhline(e["util_link_bps"] / 1e9, color="black", ls="--", lw=0.8, label="link rate")
        ax.set_title(f"{_label(r['values'])}: worker machine 0, 10 ms bins", fontsize=8)
        ax.set_ylabel("Gbit/s", fontsize=8)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=6, loc="upper right")
        if k == len(traced) - 1:
            ax.set_xlabel(f.xlabel or "emulated time from the first measured iteration, s")


def draw(target: Target, records: list[dict[str, Any]], path: Path, *, quick: bool) -> Path:
    """Write the PNG; one panel per value of ``plot.panel`` if set."""
    from matplotlib.figure import Figure

    f = target.figure_spec
    if f.layout == "traffic":
        traced = sum(1 for r in records if r.get("extra", {}).get("trace_t_s"))
        fig = Figure(figsize=(9, 3.2 + 2.2 * traced), layout="constrained")
        _traffic(fig, target, records)
        form = "quick form" if quick else "full form"
        fig.suptitle(f"{target.paper} {target.figure}: {target.title}\nSyncLab {form}", fontsize=9)
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=110)
        return path
    panels = sorted({str(r["values"].get(f.panel)) for r in records}) if f.panel else [""]
    fig = Figure(figsize=(6.5 * len(panels), 4.6), layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, panel in zip(axes, panels, strict=True):
        mine = [r for r in records if not f.panel or str(r["values"].get(f.panel)) == panel]
        (_fit if f.layout == "fit" else _lines)(ax, target, mine)
        if f.logx:
            ax.set_xscale("log", base=2 if f.layout == "lines" else 10)
        if f.logy:
            from matplotlib.ticker import ScalarFormatter

            ax.set_yscale("log")
            if f.layout == "lines":
                ax.yaxis.set_major_formatter(ScalarFormatter())
        if f.logx and f.layout == "lines":
            from matplotlib.ticker import ScalarFormatter

            ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.set_xlabel(f.xlabel or f.x)
        ax.set_ylabel(f.ylabel or f.y)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
        if panel:
            ax.set_title(f"{f.panel.rsplit('.', 1)[-1]} = {panel}", fontsize=9)
    form = "quick form" if quick else "full form"
    fig.suptitle(f"{target.paper} {target.figure}: {target.title}\nSyncLab {form} (hollow markers / dashed: the paper)",
                 fontsize=9)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    return path
