"""The target's PNG in the paper's layout, SyncLab's measured points with the paper's numbers beside
them where the text gives them (hollow black markers / dashed lines labelled "paper")."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from synclab.reproduce.schema import Target


def _num(v: Any) -> float:
    """An axis value as a number; rates such as '2667mbit' become Gbit/s."""
    try:
        return float(v)
    except (TypeError, ValueError):
        from synclab.config.units import parse_rate_bps

        return parse_rate_bps(str(v)) / 1e9


def _lines(ax, target: Target, records: list[dict[str, Any]]) -> None:
    f = target.figure_spec
    series: dict[str, list[tuple[float, float]]] = {}
    for r in records:
        y = r["metrics"].get(f.y)
        if y is None:
            continue
        name = (" ".join(str(r["values"].get(k.strip(), "")) for k in f.series.split(",")) if f.series
                else "SyncLab")  # several axis keys, comma-separated: one line per combination
        series.setdefault(name, []).append((_num(r["values"][f.x]), float(y)))
    colors = {}
    for name, pts in sorted(series.items()):
        pts.sort()
        (line,) = ax.plot([x for x, _ in pts], [y for _, y in pts], marker="o", label=f"{name} (SyncLab)")
        colors[name] = line.get_color()
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


def draw(target: Target, records: list[dict[str, Any]], path: Path, *, quick: bool) -> Path:
    """Write the PNG; one panel per value of ``plot.panel`` if set."""
    from matplotlib.figure import Figure

    f = target.figure_spec
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
