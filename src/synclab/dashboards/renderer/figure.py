"""Draw a :class:`~synclab.dashboards.renderer.query.Snapshot` as one PNG laid out like the dashboard.

Panels sit where the dashboard's grid puts them (:mod:`synclab.dashboards.renderer.layout`), with their
titles, the unit on the y axis (ticks formatted as Grafana formats the unit, axis label from the
panel), a legend table with the panel's calculations (mean, max), the field overrides that draw
reference series (the configured link rate as a dashed red line), stacking and bars. A panel
without data says "no data". The figure is labelled as what it is: rendered by SyncLab from the
dashboard's own PromQL, not a Grafana screenshot.
"""

from __future__ import annotations

import io
import math
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
from matplotlib import dates as mdates
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Rectangle
from matplotlib.ticker import FuncFormatter, MaxNLocator

from synclab.dashboards.renderer.layout import GRID_COLUMNS, height
from synclab.dashboards.renderer.query import PanelData, Series, Snapshot

HONEST_LABEL = "rendered by synclab from the dashboard's own PromQL (not a Grafana screenshot)"
WIDTH_IN = 16.0
ROW_IN = 0.36        # one grid row (Grafana: 30 px + 8 px gap on a ~80 px column)
HEADER_IN = 0.95
GAP_IN = 0.06
CAPTION_CHARS = 200  # a 9 pt line across the 16 in figure
# tab10 without its red, which the dashboards keep for reference lines (link rate)
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf",
           "#393b79", "#637939", "#8c6d31", "#7b4173", "#3182bd", "#e6550d", "#31a354"]
GRAFANA_COLORS = {"red": "#d62728", "green": "#2ca02c", "blue": "#1f77b4", "orange": "#ff7f0e",
                  "yellow": "#bcbd22", "purple": "#9467bd"}

_SI = [(1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1, "")]
_IEC = [(1 << 40, "Ti"), (1 << 30, "Gi"), (1 << 20, "Mi"), (1 << 10, "Ki"), (1, "")]


def _scaled(v: float, steps, suffix: str, decimals: int | None) -> str:
    for factor, prefix in steps:
        if abs(v) >= factor:
            return f"{_num(v / factor, decimals)} {prefix}{suffix}"
    return f"{_num(v, decimals)} {suffix}"


def _num(v: float, decimals: int | None) -> str:
    if decimals is not None:
        return f"{v:.{decimals}f}"
    return f"{v:.3g}" if abs(v) < 1000 else f"{v:.0f}"


def format_value(v: float, unit: str, decimals: int | None = None) -> str:
    """A value in a Grafana unit: ``bps`` -> ``940 Mbit/s``, ``Bps`` -> ``12 MB/s``, ``bytes`` -> ``3 MiB``,
    ``s`` -> ``85 ms``, ``percentunit`` -> ``93 %``, ``suffix: X`` -> ``12 X``."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    if v == 0:
        return "0 %" if unit in ("percent", "percentunit") else "0"
    if unit == "bps":
        return _scaled(v, _SI, "bit/s", decimals)
    if unit == "Bps":
        return _scaled(v, _SI, "B/s", decimals)
    if unit == "bytes":
        return _scaled(v, _IEC, "B", decimals)
    if unit == "s":
        a = abs(v)
        if a < 1e-6:
            return f"{_num(v * 1e9, decimals)} ns"
        if a < 1e-3:
            return f"{_num(v * 1e6, decimals)} µs"
        if a < 1:
            return f"{_num(v * 1e3, decimals)} ms"
        if a < 60:
            return f"{_num(v, decimals)} s"
        return f"{_num(v / 60, decimals)} min"
    if unit == "percentunit":
        return f"{_num(v * 100, decimals)} %"
    if unit == "percent":
        return f"{_num(v, decimals)} %"
    if unit.startswith("suffix:"):
        return f"{_num(v, decimals)} {unit.split(':', 1)[1].strip()}"
    return _num(v, decimals)


def unit_scale(vmax: float, unit: str) -> float:
    """The factor the ticks of an axis reaching ``vmax`` are shown in (1e9 for Gbit/s, 2**20 for MiB, ...)."""
    steps = {"bps": _SI, "Bps": _SI, "bytes": _IEC}.get(unit)
    if steps:
        return next((f for f, _ in steps if abs(vmax) >= f), 1)
    if unit == "s" and 0 < abs(vmax) < 1:
        return 1e-3 if abs(vmax) >= 1e-3 else 1e-6
    if unit == "percentunit":
        return 0.01
    return 1


class UnitLocator(MaxNLocator):
    """Round ticks in the unit the axis is labelled in (0, 256 MiB, 512 MiB — not 0, 286 MiB, ...)."""

    def __init__(self, unit: str, nbins: int = 5):
        super().__init__(nbins=nbins, steps=[1, 2, 2.5, 5, 10] if unit != "bytes" else [1, 2, 4, 5, 8, 10])
        self.unit = unit

    def tick_values(self, vmin, vmax):
        f = unit_scale(max(abs(vmin), abs(vmax)), self.unit)
        return [t * f for t in super().tick_values(vmin / f, vmax / f)]


def _calc(values: list[float], name: str) -> float:
    finite = [v for v in values if math.isfinite(v)]
    if not finite:
        return math.nan
    return {"mean": lambda: sum(finite) / len(finite), "max": lambda: max(finite), "min": lambda: min(finite),
            "last": lambda: finite[-1], "lastNotNull": lambda: finite[-1], "sum": lambda: sum(finite)
            }.get(name, lambda: math.nan)()


def _color(override_color: str | None, index: int) -> str:
    if override_color:
        return GRAFANA_COLORS.get(override_color, override_color)
    return PALETTE[index % len(PALETTE)]


def figure(snapshot: Snapshot, caption: str = "") -> Figure:
    """The dashboard as one matplotlib figure, 16 in wide, as tall as its grid."""
    rows = height([p.cell for p in snapshot.panels])
    caption_lines = textwrap.wrap(caption, CAPTION_CHARS) if caption else []
    header_h = HEADER_IN + 0.2 * len(caption_lines)
    fig_h = header_h + rows * ROW_IN + 0.1
    fig = Figure(figsize=(WIDTH_IN, fig_h), facecolor="white")
    _header(fig, snapshot, caption_lines, fig_h)
    col_in = (WIDTH_IN - 0.2) / GRID_COLUMNS
    for p in snapshot.panels:
        box = (0.1 + p.cell.x * col_in + GAP_IN / 2, header_h + p.cell.y * ROW_IN + GAP_IN / 2,
               p.cell.w * col_in - GAP_IN, p.cell.h * ROW_IN - GAP_IN)  # left, top (from the top), w, h
        _panel(fig, p, snapshot, box, fig_h)
    return fig


def draw(snapshot: Snapshot, out_png: Path, *, caption: str = "", dpi: int = 90, palette: bool = True) -> Path:
    """Write the PNG of one dashboard snapshot; ``palette`` stores it with 256 colours (a small file)."""
    buf = io.BytesIO()
    figure(snapshot, caption).savefig(buf, format="png", dpi=dpi)
    out_png = Path(out_png)
    if palette:
        from PIL import Image

        img = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
        img.quantize(colors=256, method=Image.Quantize.MEDIANCUT).save(out_png, optimize=True)
    else:
        out_png.write_bytes(buf.getvalue())
    return out_png


def _utc(ts: float, fmt: str = "%Y-%m-%d %H:%M:%S") -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime(fmt)


def _header(fig: Figure, s: Snapshot, caption_lines: list[str], fig_h: float) -> None:
    def y(inches: float) -> float:
        return 1 - inches / fig_h

    fig.text(0.01, y(0.12), s.dashboard.title, fontsize=15, fontweight="bold", va="top")
    fig.text(0.99, y(0.14), HONEST_LABEL, fontsize=9.5, va="top", ha="right", style="italic", color="#a01010")
    variables = ", ".join(v.describe() for v in s.variables.values())
    fig.text(0.01, y(0.50), f"{_utc(s.start)} – {_utc(s.end, '%H:%M:%S')} UTC ({(s.end - s.start) / 60:.1f} min), "
                            f"step {s.step_s:g} s · variables: {variables} · Prometheus {s.source or '?'} · "
                            f"{s.dashboard.path.name}", fontsize=8.5, va="top", color="#333333")
    empty = [p.title for p in s.empty_panels]
    fig.text(0.01, y(0.72), f"{len(s.panels) - len(empty)} of {len(s.panels)} panels with data"
             + (f"; no data: {', '.join(empty)}" if empty else ""), fontsize=8.5, va="top",
             color="#a01010" if empty else "#333333")
    for i, line in enumerate(caption_lines):
        fig.text(0.01, y(0.94 + 0.2 * i), line, fontsize=9, va="top")


def _panel(fig: Figure, p: PanelData, s: Snapshot, box: tuple[float, float, float, float], fig_h: float) -> None:
    left, top, w, h = box

    def rect(l_in: float, t_in: float, w_in: float, h_in: float) -> list[float]:
        return [l_in / WIDTH_IN, 1 - (t_in + h_in) / fig_h, w_in / WIDTH_IN, h_in / fig_h]

    fig.add_artist(Rectangle((left / WIDTH_IN, 1 - (top + h) / fig_h), w / WIDTH_IN, h / fig_h,
                             transform=fig.transFigure, facecolor="#f7f7f8", edgecolor="#c8c8cc", lw=0.8, zorder=-1))
    fig.text((left + 0.08) / WIDTH_IN, 1 - (top + 0.06) / fig_h, p.title, fontsize=9.5, fontweight="bold",
             va="top")
    inner_top, inner_h = top + 0.3, h - 0.36
    if not p.has_data:
        fig.text((left + w / 2) / WIDTH_IN, 1 - (top + h / 2) / fig_h, "no data", fontsize=16, color="#909090",
                 ha="center", va="center")
        queries = "\n".join(f"{t.target.ref_id}: {t.query[:110]}" for t in p.targets)
        fig.text((left + 0.08) / WIDTH_IN, 1 - (top + h - 0.08) / fig_h, queries, fontsize=6, color="#707070",
                 va="bottom")
        return
    if p.panel.type == "table":
        _table(fig.add_axes(rect(left + 0.1, inner_top, w - 0.2, inner_h)), p)
        return
    if p.panel.type != "timeseries":
        fig.text((left + w / 2) / WIDTH_IN, 1 - (top + h / 2) / fig_h,
                 f"panel type {p.panel.type!r} is not drawn by synclab (its data is in the CSV)",
                 fontsize=9, color="#707070", ha="center", va="center")
        return
    series = [x for x in p.series if x.has_data]
    legend_rows, ncol = _legend_shape(len(series), inner_h, w) if p.panel.show_legend else (0, 1)
    legend_h = 0.16 * (legend_rows + 1) if legend_rows else 0
    ax = fig.add_axes(rect(left + 0.95, inner_top, w - 1.1, inner_h - legend_h - 0.3))
    styles = _timeseries(ax, p, series, s)
    if legend_rows:
        lax = fig.add_axes(rect(left + 0.15, top + h - legend_h - 0.05, w - 0.3, legend_h))
        _legend(lax, p, series, styles, legend_rows, ncol)


def _legend_shape(n: int, inner_h: float, w: float) -> tuple[int, int]:
    """(rows, columns) of the legend table: at most ~40 % of the panel's height, up to 3 columns
    on a wide panel; series beyond that are counted, not listed."""
    max_rows = max(1, int((inner_h * 0.4) / 0.16) - 1)
    ncol = 1 if n <= max_rows or w < 7 else min(3, math.ceil(n / max_rows))
    return min(math.ceil(n / ncol), max_rows), ncol


def _timeseries(ax, p: PanelData, series: list[Series], s: Snapshot) -> list[dict]:
    panel = p.panel
    styles = []
    for i, x in enumerate(series):
        o = panel.override_for(x.name)
        styles.append({
            "color": _color(o.color if o else None, i),
            "lw": o.line_width if o and o.line_width is not None else panel.line_width,
            "fill": (o.fill_opacity if o and o.fill_opacity is not None else panel.fill_opacity) / 100,
            "dashed": bool(o and o.dashed),
        })
    times = sorted({t for x in series for t in x.times})
    index = {t: k for k, t in enumerate(times)}
    dates = mdates.date2num([datetime.fromtimestamp(t, timezone.utc) for t in times])
    bottom = np.zeros(len(times))
    for x, st in zip(series, styles):
        y = np.full(len(times), np.nan)
        for t, v in zip(x.times, x.values):
            y[index[t]] = v
        stack = panel.stacked and not st["dashed"]
        base = bottom.copy() if stack else np.zeros(len(times))
        top = base + np.nan_to_num(y) if stack else y
        if panel.bars:
            dense = len(times) > 150  # bars a pixel or two wide: no gaps, or they alias into stripes
            ax.bar(dates, np.nan_to_num(y), width=s.step_s / 86400 * (1.0 if dense else 0.9), bottom=base,
                   color=st["color"], alpha=max(st["fill"], 0.3), linewidth=0 if dense else 0.3,
                   edgecolor=st["color"])
        else:
            ax.plot(dates, np.where(np.isnan(y), np.nan, top), color=st["color"], lw=st["lw"],
                    linestyle=(0, (4, 3)) if st["dashed"] else "-")
            if st["fill"] > 0:
                ax.fill_between(dates, base, np.where(np.isnan(y), base, top), color=st["color"], alpha=st["fill"],
                                lw=0)
        if stack:
            bottom = base + np.nan_to_num(y)
    ax.set_xlim(mdates.date2num(datetime.fromtimestamp(s.start, timezone.utc)),
                mdates.date2num(datetime.fromtimestamp(s.end, timezone.utc)))
    if panel.y_min is not None:
        ax.set_ylim(bottom=panel.y_min)
    if panel.y_max is not None:
        ax.set_ylim(top=panel.y_max)
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S", tz=timezone.utc))
    ax.xaxis.set_major_locator(mdates.AutoDateLocator(minticks=5, maxticks=10, tz=timezone.utc))
    ax.yaxis.set_major_locator(UnitLocator(panel.unit))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: format_value(v, panel.unit)))
    ax.set_ylabel(panel.axis_label, fontsize=8)
    ax.tick_params(labelsize=7.5)
    ax.grid(True, color="#e2e2e6", lw=0.6)
    ax.set_facecolor("white")
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    return styles


def _legend(ax, p: PanelData, series: list[Series], styles: list[dict], rows: int, ncol: int) -> None:
    ax.set_axis_off()
    ax.set_xlim(0, 1)
    ax.set_ylim(0, rows + 1)
    calcs = [c for c in p.panel.legend_calcs if c in ("mean", "max", "min", "last", "lastNotNull", "sum")]
    span = 1 / ncol
    calc_w = min(0.11, 0.3 * span)  # width of one calculation column
    size = 7 if ncol < 3 else 6.5
    shown = rows * ncol
    for c in range(min(ncol, math.ceil(len(series) / rows))):
        for k, name in enumerate(reversed(calcs)):
            ax.text(c * span + span - 0.01 - k * calc_w, rows + 0.5, name, fontsize=size, ha="right", va="center",
                    color="#555555", fontweight="bold")
    for i, (x, st) in enumerate(zip(series[:shown], styles[:shown])):
        c, r = divmod(i, rows)
        x0, yy = c * span, rows - r - 0.5
        ax.add_line(Line2D([x0 + 0.005, x0 + 0.03], [yy, yy], color=st["color"], lw=2,
                           linestyle=(0, (2, 1.5)) if st["dashed"] else "-"))
        name = x.name if len(x.name) <= 60 else x.name[:57] + "..."
        ax.text(x0 + 0.04, yy, name, fontsize=size, va="center")
        for k, calc in enumerate(reversed(calcs)):
            ax.text(x0 + span - 0.01 - k * calc_w, yy, format_value(_calc(x.values, calc), p.panel.unit),
                    fontsize=size, ha="right", va="center")
    if len(series) > shown:
        ax.text(1, -0.3, f"+{len(series) - shown} more series (in the CSV)", fontsize=6.5, ha="right",
                va="center", color="#707070")


def _table(ax, p: PanelData) -> None:
    ax.set_axis_off()
    rows = [x for x in p.series if x.has_data]
    columns = sorted({k for x in rows for k in x.labels if k != "__name__"})
    cells = [[x.labels.get(c, "") for c in columns] + [format_value(x.values[-1], p.panel.unit)] for x in rows]
    table = ax.table(cellText=cells, colLabels=columns + ["Value"], loc="upper center", cellLoc="left",
                     colLoc="left")
    table.auto_set_font_size(False)
    table.set_fontsize(7.5)
    table.scale(1, 1.1)
