"""A Grafana dashboard file read into small typed objects (:func:`load_dashboard`).

A malformed file raises :class:`DashboardError` naming the file and the problem.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from synclab.dashboards.renderer.layout import Cell


class DashboardError(ValueError):
    """A dashboard file this renderer cannot read; the message names the file and the problem."""


@dataclass(frozen=True)
class Target:
    ref_id: str
    expr: str
    legend: str
    instant: bool


@dataclass(frozen=True)
class Override:
    """A field override Grafana applies to series whose name matches (``byRegexp``/``byName``)."""

    pattern: str
    regex: bool
    dashed: bool = False
    fill_opacity: float | None = None
    line_width: float | None = None
    color: str | None = None

    def matches(self, name: str) -> bool:
        return bool(re.fullmatch(self.pattern, name)) if self.regex else name == self.pattern


@dataclass(frozen=True)
class Panel:
    title: str
    type: str
    cell: Cell
    targets: tuple[Target, ...]
    unit: str = "none"
    axis_label: str = ""
    y_min: float | None = None
    y_max: float | None = None
    bars: bool = False
    stacked: bool = False
    fill_opacity: float = 0.0
    line_width: float = 1.0
    legend_calcs: tuple[str, ...] = ()
    show_legend: bool = True
    overrides: tuple[Override, ...] = ()
    repeat: str | None = None
    repeat_direction: str = "h"
    max_per_row: int | None = None
    description: str = ""

    def override_for(self, series_name: str) -> Override | None:
        return next((o for o in reversed(self.overrides) if o.matches(series_name)), None)


@dataclass(frozen=True)
class VariableSpec:
    name: str
    type: str
    query: str = ""
    include_all: bool = False
    all_value: str | None = None
    current: tuple[str, ...] = ()
    options: tuple[str, ...] = ()
    sort: int = 0


@dataclass(frozen=True)
class Dashboard:
    path: Path
    uid: str
    title: str
    time_from: str
    time_to: str
    variables: tuple[VariableSpec, ...]
    panels: tuple[Panel, ...]


def _read_json(path: Path, what: str) -> Any:
    """``path``'s decoded JSON; :class:`DashboardError` naming the file when it cannot be read or parsed."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise DashboardError(f"{path}: cannot read{what}: {e.strerror or e}") from None
    except ValueError as e:
        raise DashboardError(f"{path}: not valid JSON: {e}") from None


def load_dashboard(path: Path) -> Dashboard:
    """Read one dashboard JSON file (a Grafana dashboard model, as checked in under grafana/dashboards)."""
    data = _read_json(path, "")
    if isinstance(data, dict) and isinstance(data.get("dashboard"), dict):
        data = data["dashboard"]  # the HTTP API's envelope
    if not isinstance(data, dict):
        raise DashboardError(f"{path}: a dashboard is a JSON object, got {type(data).__name__}")
    raw_panels = data.get("panels")
    if not isinstance(raw_panels, list) or not raw_panels:
        raise DashboardError(f"{path}: no \"panels\" list")
    panels = []
    for raw in _flatten(raw_panels, path):
        panels.append(_panel(raw, path))
    templating = data.get("templating", {})
    raw_vars = templating.get("list", []) if isinstance(templating, dict) else None
    if not isinstance(raw_vars, list):
        raise DashboardError(f"{path}: \"templating.list\" must be a list")
    variables = tuple(_variable(v, path) for v in raw_vars)
    t = data.get("time") or {}
    return Dashboard(Path(path), str(data.get("uid", "")), str(data.get("title") or Path(path).stem),
                     str(t.get("from", "now-5m")), str(t.get("to", "now")), variables, tuple(panels))


def _flatten(raw_panels: list, path: Path) -> list[dict]:
    out = []
    for i, p in enumerate(raw_panels):
        if not isinstance(p, dict):
            raise DashboardError(f"{path}: panel #{i} is not an object")
        if p.get("type") == "row":
            out.extend(_flatten(p.get("panels") or [], path))  # a collapsed row nests its panels
        else:
            out.append(p)
    return out


def _panel(p: dict, path: Path) -> Panel:
    title = str(p.get("title", ""))
    where = f"{path}: panel {title!r}"
    g = p.get("gridPos")
    if not isinstance(g, dict) or not all(isinstance(g.get(k), int) and not isinstance(g.get(k), bool)
                                          for k in ("x", "y", "w", "h")):
        raise DashboardError(f"{where}: \"gridPos\" needs integer x, y, w and h, got {g!r}")
    if g["w"] < 1 or g["h"] < 1 or g["x"] < 0 or g["y"] < 0:
        raise DashboardError(f"{where}: \"gridPos\" {g!r} has a negative place or an empty size")
    targets = []
    for t in p.get("targets") or []:
        if not isinstance(t, dict):
            raise DashboardError(f"{where}: a target is not an object")
        if t.get("hide"):
            continue
        expr = t.get("expr")
        if expr in (None, ""):
            continue
        if not isinstance(expr, str):
            raise DashboardError(f"{where}: target {t.get('refId')!r} has a non-string \"expr\"")
        targets.append(Target(str(t.get("refId", "")), expr, str(t.get("legendFormat") or ""),
                              bool(t.get("instant")) and not t.get("range")))
    fc = p.get("fieldConfig") or {}
    defaults = fc.get("defaults") or {}
    custom = defaults.get("custom") or {}
    legend = (p.get("options") or {}).get("legend") or {}
    overrides = tuple(o for o in (_override(o, where) for o in fc.get("overrides") or []) if o)
    repeat = p.get("repeat") or None
    return Panel(
        title=title, type=str(p.get("type", "timeseries")), cell=Cell(g["x"], g["y"], g["w"], g["h"]),
        targets=tuple(targets), unit=str(defaults.get("unit") or "none"),
        axis_label=str(custom.get("axisLabel") or ""), y_min=_number(defaults.get("min"), where, "min"),
        y_max=_number(defaults.get("max"), where, "max"), bars=custom.get("drawStyle") == "bars",
        stacked=(custom.get("stacking") or {}).get("mode") in ("normal", "percent"),
        fill_opacity=float(custom.get("fillOpacity") or 0), line_width=float(custom.get("lineWidth") or 1),
        legend_calcs=tuple(legend.get("calcs") or ()), show_legend=legend.get("showLegend", True) is not False,
        overrides=overrides, repeat=str(repeat) if repeat else None,
        repeat_direction=str(p.get("repeatDirection") or "h"),
        max_per_row=p.get("maxPerRow") if isinstance(p.get("maxPerRow"), int) else None,
        description=str(p.get("description") or ""))


def _number(v, where: str, key: str) -> float | None:
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise DashboardError(f"{where}: \"{key}\" must be a number, got {v!r}")
    return float(v)


def _override(o: dict, where: str) -> Override | None:
    matcher = (o or {}).get("matcher") or {}
    if matcher.get("id") not in ("byRegexp", "byName"):
        return None  # other matchers (byType, byFrameRefID, ...) are not drawn differently here
    values = {prop.get("id"): prop.get("value") for prop in o.get("properties") or [] if isinstance(prop, dict)}
    style = values.get("custom.lineStyle") or {}
    color = values.get("color") or {}
    pattern = str(matcher.get("options", ""))
    if matcher["id"] == "byRegexp":
        try:
            re.compile(pattern)
        except re.error as e:
            raise DashboardError(f"{where}: override regex {pattern!r} does not compile: {e}") from None
    return Override(pattern, matcher["id"] == "byRegexp", dashed=style.get("fill") in ("dash", "dot"),
                    fill_opacity=values.get("custom.fillOpacity"), line_width=values.get("custom.lineWidth"),
                    color=color.get("fixedColor") if color.get("mode") == "fixed" else None)


def _variable(v: dict, path: Path) -> VariableSpec:
    if not isinstance(v, dict) or not v.get("name"):
        raise DashboardError(f"{path}: a template variable has no name")
    cur = (v.get("current") or {}).get("value")
    current = tuple(str(x) for x in (cur if isinstance(cur, list) else [cur] if cur not in (None, "") else []))
    query = v.get("query") or ""
    if isinstance(query, dict):
        query = query.get("query", "")
    options = tuple(str(o.get("value")) for o in v.get("options") or [] if isinstance(o, dict)
                    and o.get("value") not in (None, "$__all"))
    if not options and v.get("type") == "custom" and isinstance(query, str):
        options = tuple(x.strip() for x in query.split(",") if x.strip())
    return VariableSpec(str(v["name"]), str(v.get("type", "query")), str(query), bool(v.get("includeAll")),
                        v.get("allValue") or None, current, options, int(v.get("sort") or 0))
