"""Run a dashboard's own queries against Prometheus, the way Grafana would, and keep the answers.

:func:`load_dashboard` reads a dashboard JSON file into small typed objects (a malformed file
raises :class:`DashboardError` naming the file and the problem); :func:`take_snapshot` resolves
its variables (All → the variable's ``allValue``, repeated panels → one copy per value of
``label_values(...)``), expands ``$__interval``/``$__rate_interval`` for the chosen step, runs
every target (range queries, instant ones for tables) through a :class:`Source` and returns a
:class:`Snapshot`; :func:`write_data` saves it as CSV and JSON. Drawing is
:mod:`synclab.dashboards.figure`.
"""

from __future__ import annotations

import csv
import json
import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Protocol

from synclab.dashboards.layout import Cell, Repeat, arrange
from synclab.dashboards.prometheus import QueryRejected
from synclab.dashboards.promql import _VAR, expand
from synclab.units import parse_prometheus_duration_s


class DashboardError(ValueError):
    """A dashboard file this renderer cannot read; the message names the file and the problem."""


class Source(Protocol):
    """What the snapshot asks Prometheus (:class:`synclab.dashboards.prometheus.Prometheus`)."""

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]: ...

    def query(self, expr: str, at: float) -> list[dict]: ...

    def label_values(self, label: str, match: str | None, start: float, end: float) -> list[str]: ...


# ---------------------------------------------------------------- the dashboard, typed

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


# ---------------------------------------------------------------- time and steps

def parse_time(text: str, now: float) -> float:
    """``now``, ``now-5m``, ``now+30s``, unix seconds, or an ISO 8601 time (UTC unless it says)."""
    text = text.strip()
    m = re.fullmatch(r"now(?:([+-])(.+))?", text)
    if m:
        sign = 1 if m.group(1) == "+" else -1
        return now if not m.group(1) else now + sign * parse_prometheus_duration_s(m.group(2))
    try:
        return float(text)
    except ValueError:
        pass
    try:
        t = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"cannot parse time {text!r} (use now, now-5m, unix seconds or 2026-11-23T18:00:00Z)") from None
    return (t if t.tzinfo else t.replace(tzinfo=timezone.utc)).timestamp()


# Grafana's roundInterval: a raw interval (range / max data points) snaps to one of these.
_ROUND = [(0.015, 0.01), (0.035, 0.02), (0.075, 0.05), (0.15, 0.1), (0.35, 0.2), (0.75, 0.5), (1.5, 1), (3.5, 2),
          (7.5, 5), (12.5, 10), (17.5, 15), (25, 20), (45, 30), (90, 60), (210, 120), (450, 300), (750, 600),
          (1050, 900), (1500, 1200), (2700, 1800), (5400, 3600)]


def auto_step(range_s: float, scrape_interval_s: float, max_points: int = 1000) -> float:
    """The step (= ``$__interval``) Grafana picks for a panel about ``max_points`` pixels wide."""
    raw = range_s / max_points
    rounded = next((to for upto, to in _ROUND if raw <= upto), 3600 * math.ceil(raw / 3600))
    return max(rounded, scrape_interval_s)


# ---------------------------------------------------------------- variables

@dataclass(frozen=True)
class Variable:
    """A resolved variable: what ``$name`` becomes in a query, and the values a panel repeats over."""

    name: str
    text: str
    values: tuple[str, ...]
    all: bool = False

    def describe(self) -> str:
        return f"{self.name}=All" if self.all else f"{self.name}={self.text}"


_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(?:(.+?)\s*,\s*)?([A-Za-z_]\w*)\s*\)\s*$")


def _multi(values: list[str]) -> str:
    """Several values in a regex matcher, as Grafana's Prometheus datasource formats them."""
    if len(values) == 1:
        return values[0]
    return "(" + "|".join(re.sub(r"([\\^$.|?*+()\[\]{}])", r"\\\1", v) for v in values) + ")"


def _natural(s: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", s)]


def _sorted(values: list[str], sort: int) -> list[str]:
    keys = {1: str, 2: str, 3: lambda s: float(s) if _is_num(s) else math.inf,
            4: lambda s: float(s) if _is_num(s) else -math.inf, 5: str.lower, 6: str.lower, 7: _natural, 8: _natural}
    if sort not in keys:
        return values
    return sorted(values, key=keys[sort], reverse=sort in (2, 4, 6, 8))


def _is_num(s: str) -> bool:
    try:
        float(s)
        return True
    except ValueError:
        return False


def resolve_variables(dashboard: Dashboard, source: Source, start: float, end: float,
                      given: dict[str, list[str]] | None = None) -> dict[str, Variable]:
    """Every variable's value: ``given`` (``--var name=a,b``) first, else the dashboard's current
    selection; "All" becomes ``allValue`` in queries and every value of the variable's
    ``label_values(...)`` query (over the time range) for repeated panels."""
    given = dict(given or {})
    unknown = set(given) - {v.name for v in dashboard.variables}
    if unknown:
        raise DashboardError(f"{dashboard.path}: no variable {', '.join(sorted(unknown))} "
                             f"(it has {', '.join(v.name for v in dashboard.variables) or 'none'})")
    out: dict[str, Variable] = {}
    for v in dashboard.variables:
        chosen = given.get(v.name) or [c for c in v.current if c != "$__all"]
        wants_all = v.name not in given and (not v.current or "$__all" in v.current)
        if wants_all and v.type in ("query", "custom"):
            values = _all_values(v, dashboard, source, start, end, out)
            text = v.all_value if v.all_value is not None else _multi(values) if values else ".*"
            out[v.name] = Variable(v.name, text, tuple(values), all=True)
        elif chosen:
            out[v.name] = Variable(v.name, _multi(chosen), tuple(chosen))
        else:
            out[v.name] = Variable(v.name, v.query if v.type in ("constant", "textbox") else "", ())
    return out


def _all_values(v: VariableSpec, dashboard: Dashboard, source: Source, start: float, end: float,
                known: dict[str, Variable]) -> list[str]:
    if v.type == "custom":
        return list(v.options)
    m = _LABEL_VALUES.match(v.query)
    if not m:
        raise DashboardError(f"{dashboard.path}: variable {v.name!r}: query {v.query!r} is not "
                             f"label_values(...); give its values with --var {v.name}=VALUE")
    match = m.group(1)
    if match:
        try:
            match = expand(match, {k: x.text for k, x in known.items()})
        except KeyError as e:
            raise DashboardError(f"{dashboard.path}: variable {v.name!r}: {e.args[0]}") from None
        if "{" not in match:
            match += "{}"
    return _sorted(list(source.label_values(m.group(2), match, start, end)), v.sort)


# ---------------------------------------------------------------- the snapshot

@dataclass
class Series:
    name: str
    labels: dict[str, str]
    times: list[float]
    values: list[float]  # NaN where Prometheus answered NaN or ±Inf

    @property
    def has_data(self) -> bool:
        return any(math.isfinite(v) for v in self.values)


@dataclass
class TargetData:
    target: Target
    query: str  # the expression as sent, variables and macros expanded
    series: list[Series]

    @property
    def has_data(self) -> bool:
        return any(s.has_data for s in self.series)


@dataclass
class PanelData:
    panel: Panel
    title: str
    cell: Cell
    targets: list[TargetData]
    variables: dict[str, str] = field(default_factory=dict)

    @property
    def has_data(self) -> bool:
        return any(t.has_data for t in self.targets)

    @property
    def series(self) -> list[Series]:
        return [s for t in self.targets for s in t.series]


@dataclass
class Snapshot:
    dashboard: Dashboard
    source: str
    start: float
    end: float
    step_s: float
    scrape_interval_s: float
    variables: dict[str, Variable]
    panels: list[PanelData]
    taken_at: float = field(default_factory=time.time)

    @property
    def empty_panels(self) -> list[PanelData]:
        return [p for p in self.panels if not p.has_data]


def legend_name(fmt: str, labels: dict[str, str]) -> str:
    """Grafana's legend: ``{{label}}`` replaced by the series' label; without a format, the series' labels."""
    if fmt and fmt != "__auto":
        return re.sub(r"\{\{\s*([\w.]+)\s*\}\}", lambda m: labels.get(m.group(1), ""), fmt)
    name = labels.get("__name__", "")
    rest = ", ".join(f'{k}="{v}"' for k, v in sorted(labels.items()) if k != "__name__")
    return f"{name}{{{rest}}}" if rest or not name else name


def _title(text: str, variables: dict[str, str]) -> str:
    return _VAR.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)


def _series(result: list[dict], legend: str, instant: bool) -> list[Series]:
    out = []
    for s in result:
        points = [s["value"]] if instant else s.get("values", [])
        times = [float(t) for t, _ in points]
        values = [_float(v) for _, v in points]
        out.append(Series(legend_name(legend, s.get("metric", {})), dict(s.get("metric", {})), times, values))
    return out


def _float(v: str) -> float:
    x = float(v)
    return x if math.isfinite(x) else math.nan


def take_snapshot(dashboard: Dashboard, source: Source, start: float, end: float, *, step_s: float | None = None,
                  scrape_interval_s: float = 1.0, given: dict[str, list[str]] | None = None,
                  source_name: str = "") -> Snapshot:
    """Every panel of ``dashboard`` with the answers to its queries over [start, end]."""
    if end <= start:
        raise ValueError(f"the time range is empty: start {start} is not before end {end}")
    step = step_s or auto_step(end - start, scrape_interval_s)
    start, end = math.floor(start / step) * step, math.floor(end / step) * step  # Grafana aligns to the step
    variables = resolve_variables(dashboard, source, start, end, given)
    texts = {k: v.text for k, v in variables.items()}
    copies: list[list[dict[str, str]]] = []
    for p in dashboard.panels:
        if p.repeat:
            if p.repeat not in variables:
                raise DashboardError(f"{dashboard.path}: panel {p.title!r} repeats over ${p.repeat}, "
                                     "which is not a variable of the dashboard")
            values = variables[p.repeat].values or (variables[p.repeat].text,)
            copies.append([{**texts, p.repeat: v} for v in values])
        else:
            copies.append([texts])
    cells = arrange([p.cell for p in dashboard.panels],
                    [Repeat(len(c), p.repeat_direction, p.max_per_row) if p.repeat else None
                     for p, c in zip(dashboard.panels, copies)])
    panels = []
    for p, var_sets, placed in zip(dashboard.panels, copies, cells):
        for var_values, cell in zip(var_sets, placed):
            targets = []
            for t in p.targets:
                try:
                    query = expand(t.expr, var_values, scrape_interval_s, interval_s=step, range_s=end - start)
                except KeyError as e:
                    raise DashboardError(f"{dashboard.path}: panel {p.title!r} / {t.ref_id}: {e.args[0]}") from None
                try:
                    result = (source.query(query, end) if t.instant
                              else source.query_range(query, start, end, step))
                except QueryRejected as e:
                    raise QueryRejected(f"{dashboard.path.name} / {p.title} / {t.ref_id}: Prometheus refused "
                                        f"{query!r}: {e}") from None
                targets.append(TargetData(t, query, _series(result, t.legend, t.instant)))
            shown = {k: v for k, v in var_values.items() if k == p.repeat}
            panels.append(PanelData(p, _title(p.title, var_values), cell, targets, shown))
    return Snapshot(dashboard, source_name, start, end, step, scrape_interval_s, variables, panels)


# ---------------------------------------------------------------- files

def write_data(snapshot: Snapshot, stem: Path) -> tuple[Path, Path]:
    """``STEM.csv`` (one row per sample) and ``STEM.json`` (queries, labels and samples) of a snapshot."""
    csv_path, json_path = stem.with_suffix(".csv"), stem.with_suffix(".json")
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["panel", "ref_id", "series", "time_s", "time_utc", "value"])
        for p in snapshot.panels:
            for t in p.targets:
                for s in t.series:
                    for ts, v in zip(s.times, s.values):
                        w.writerow([p.title, t.target.ref_id, s.name, f"{ts:.3f}", _utc(ts),
                                    "" if math.isnan(v) else repr(v)])
    doc = {
        "rendered_by": "synclab dashboards render (the dashboard's own PromQL; not a Grafana screenshot)",
        "dashboard": {"file": str(snapshot.dashboard.path), "uid": snapshot.dashboard.uid,
                      "title": snapshot.dashboard.title},
        "prometheus": snapshot.source, "start": snapshot.start, "end": snapshot.end,
        "start_utc": _utc(snapshot.start), "end_utc": _utc(snapshot.end), "step_s": snapshot.step_s,
        "scrape_interval_s": snapshot.scrape_interval_s,
        "variables": {k: {"text": v.text, "values": list(v.values), "all": v.all}
                      for k, v in snapshot.variables.items()},
        "no_data": [p.title for p in snapshot.empty_panels],
        "panels": [{
            "title": p.title, "type": p.panel.type, "unit": p.panel.unit,
            "gridPos": {"x": p.cell.x, "y": p.cell.y, "w": p.cell.w, "h": p.cell.h},
            "variables": p.variables, "has_data": p.has_data,
            "targets": [{"refId": t.target.ref_id, "expr": t.target.expr, "query": t.query,
                         "instant": t.target.instant, "has_data": t.has_data,
                         "series": [{"name": s.name, "labels": s.labels,
                                     "values": [[ts, None if math.isnan(v) else v] for ts, v in zip(s.times, s.values)]}
                                    for s in t.series]} for t in p.targets],
        } for p in snapshot.panels],
    }
    json_path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    return csv_path, json_path


def _utc(ts: float) -> str:
    return datetime.fromtimestamp(ts, timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


# ---------------------------------------------------------------- saved answers

class SavedAnswers:
    """A :class:`Source` that answers from the JSON :func:`write_data` wrote: draw a dashboard again
    (another size, a newer drawing) after the Prometheus that answered is gone. Every query must
    be one the saved snapshot asked; the dashboard's variables take the values they had then."""

    def __init__(self, doc: dict, dashboard: Dashboard, path: Path):
        self.doc, self.dashboard, self.path = doc, dashboard, path
        self.answers: dict[tuple[str, bool], list[dict]] = {}
        try:
            for p in doc["panels"]:
                for t in p["targets"]:
                    self.answers[(t["query"], bool(t["instant"]))] = t["series"]
            self.start, self.end = float(doc["start"]), float(doc["end"])
            self.step_s, self.scrape_interval_s = float(doc["step_s"]), float(doc["scrape_interval_s"])
            self.variables = {k: v for k, v in doc["variables"].items()}
        except (KeyError, TypeError, ValueError) as e:
            raise DashboardError(f"{path}: not a snapshot written by synclab dashboards render ({e!r} missing "
                                 "or malformed)") from None

    def given(self) -> dict[str, list[str]]:
        """The variables that were not at All, as ``--var`` would give them."""
        return {k: list(v["values"]) or [v["text"]] for k, v in self.variables.items() if not v.get("all")}

    def _series(self, expr: str, instant: bool) -> list[dict]:
        if (expr, instant) not in self.answers:
            raise DashboardError(f"{self.path}: no saved answer to {expr!r} (did {self.dashboard.path.name} "
                                 "change since the snapshot was taken?)")
        return self.answers[(expr, instant)]

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]:
        return [{"metric": s["labels"], "values": [[t, "NaN" if v is None else repr(v)] for t, v in s["values"]]}
                for s in self._series(expr, False)]

    def query(self, expr: str, at: float) -> list[dict]:
        out = []
        for s in self._series(expr, True):
            t, v = s["values"][-1]
            out.append({"metric": s["labels"], "value": [t, "NaN" if v is None else repr(v)]})
        return out

    def label_values(self, label: str, match: str | None, start: float, end: float) -> list[str]:
        for v in self.dashboard.variables:
            m = _LABEL_VALUES.match(v.query)
            if m and m.group(2) == label and v.name in self.variables:
                return list(self.variables[v.name]["values"])
        raise DashboardError(f"{self.path}: no saved values of label {label!r}")


def load_saved(path: Path, dashboard: Dashboard) -> SavedAnswers:
    doc = _read_json(path, " the saved snapshot")
    if not isinstance(doc, dict):
        raise DashboardError(f"{path}: not a snapshot written by synclab dashboards render")
    saved = SavedAnswers(doc, dashboard, Path(path))
    uid = (doc.get("dashboard") or {}).get("uid")
    if uid and dashboard.uid and uid != dashboard.uid:
        raise DashboardError(f"{path}: is a snapshot of dashboard {uid!r}, not {dashboard.uid!r}")
    return saved
