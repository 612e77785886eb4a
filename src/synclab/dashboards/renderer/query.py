"""Run a dashboard's own queries against Prometheus, the way Grafana would (:func:`take_snapshot`).

:func:`take_snapshot` resolves the dashboard's variables (All → the variable's ``allValue``,
repeated panels → one copy per value of ``label_values(...)``), expands
``$__interval``/``$__rate_interval`` for the chosen step, runs every target (range queries,
instant ones for tables) through a :class:`Source` and returns a :class:`Snapshot`. Saving it is
:mod:`synclab.dashboards.renderer.saved`; drawing it, :mod:`synclab.dashboards.renderer.figure`.
"""

from __future__ import annotations

import math
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Protocol

from synclab.dashboards.promql import _VAR, expand
from synclab.dashboards.renderer.layout import Cell, Repeat, arrange
from synclab.dashboards.renderer.model import Dashboard, DashboardError, Panel, Target, VariableSpec
from synclab.dashboards.renderer.prometheus import QueryRejected
from synclab.units import parse_prometheus_duration_s


class Source(Protocol):
    """What the snapshot asks Prometheus (:class:`synclab.dashboards.renderer.prometheus.Prometheus`)."""

    def query_range(self, expr: str, start: float, end: float, step_s: float) -> list[dict]: ...

    def query(self, expr: str, at: float) -> list[dict]: ...

    def label_values(self, label: str, match: str | None, start: float, end: float) -> list[str]: ...


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
