"""Shared pieces of the SyncLab dashboards: datasource, variables and a time-series panel helper.

Every panel goes through :func:`timeseries`, which insists on a unit for the
y axis and an axis label, so no dashboard ships an axis without units.
"""

from __future__ import annotations

from dataclasses import dataclass

from grafana_foundation_sdk.builders import common as common_builders
from grafana_foundation_sdk.builders import dashboard as dash
from grafana_foundation_sdk.builders import prometheus, table, timeseries
from grafana_foundation_sdk.models import common
from grafana_foundation_sdk.models.dashboard import (
    DashboardCursorSync,
    DataSourceRef,
    DynamicConfigValue,
    VariableOption,
    VariableRefresh,
    VariableSort,
)
from grafana_foundation_sdk.models.prometheus import PromQueryFormat

# The provisioned datasource (grafana/provisioning/datasources/prometheus.yaml) has this uid.
DATASOURCE_UID = "synclab-prometheus"
DATASOURCE = DataSourceRef(type_val="prometheus", uid=DATASOURCE_UID)

# Prometheus scrapes every second; Grafana's $__rate_interval follows the datasource's
# timeInterval (1s), i.e. 4 s windows: short enough to show P3's per-iteration bursts.
RATE = "$__rate_interval"
# Per-iteration quantities (iteration time, samples, aggregation) need a window spanning
# a few iterations, which can last seconds: the dashboards' `window` variable.
WINDOW = "$window"
ROLE = 'role=~"$role"'
NODES = 'role=~"$role", node=~"$node"'


@dataclass(frozen=True)
class Query:
    """One PromQL target: the expression and the legend Grafana draws for its series."""

    expr: str
    legend: str


def variables() -> list:
    """``role`` and ``node`` (every panel filters on both; ``node`` follows ``role``) and ``window``."""
    all_ = VariableOption(selected=True, text="All", value="$__all")
    role = (dash.QueryVariable("role").label("Role").datasource(DATASOURCE)
            .query("label_values(synclab_interface_transmit_bytes_total, role)")
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.ALPHABETICAL_ASC)
            .multi(True).include_all(True).all_value(".*").current(all_))
    node = (dash.QueryVariable("node").label("Node").datasource(DATASOURCE)
            .query('label_values(synclab_interface_transmit_bytes_total{role=~"$role"}, node)')
            .refresh(VariableRefresh.ON_TIME_RANGE_CHANGED).sort(VariableSort.NATURAL_ASC)
            .multi(True).include_all(True).all_value(".*").current(all_))
    windows = ["5s", "10s", "30s", "1m", "5m"]
    window = (dash.CustomVariable("window").label("Window").values(",".join(windows))
              .options([VariableOption(selected=w == "10s", text=w, value=w) for w in windows])
              .current(VariableOption(selected=True, text="10s", value="10s")))
    return [role, node, window]


def timeseries_panel(title: str, *, unit: str, axis_label: str, queries: list[Query], description: str = "",
                     width: int = 12, height: int = 8, stack: bool = False, bars: bool = False,
                     min_zero: bool = True) -> timeseries.Panel:
    """A time-series panel with a unit and a labelled y axis (both mandatory)."""
    if not unit or not axis_label:
        raise ValueError(f"panel {title!r}: every axis needs a unit and a label")
    panel = (timeseries.Panel().title(title).datasource(DATASOURCE).unit(unit).axis_label(axis_label)
             .span(width).height(height).line_width(1).fill_opacity(10 if not bars else 80)
             .show_points(common.VisibilityMode.NEVER)
             .legend(common_builders.VizLegendOptions().display_mode(common.LegendDisplayMode.TABLE)
                     .placement(common.LegendPlacement.BOTTOM).show_legend(True).calcs(["mean", "max"]))
             .tooltip(common_builders.VizTooltipOptions().mode(common.TooltipDisplayMode.MULTI)
                      .sort(common.SortOrder.DESCENDING)))
    if description:
        panel = panel.description(description)
    if min_zero:
        panel = panel.min(0)
    if bars:
        panel = panel.draw_style(common.GraphDrawStyle.BARS)
    if stack:
        panel = panel.stacking(common_builders.StackingConfig().mode(common.StackingMode.NORMAL))
    for i, q in enumerate(queries):
        panel = panel.with_target(prometheus.Dataquery().expr(q.expr).legend_format(q.legend)
                                  .ref_id(chr(ord("A") + i)).range().datasource(DATASOURCE))
    return panel


def table_panel(title: str, query: Query, *, description: str = "", width: int = 24,
                height: int = 5) -> table.Panel:
    """The latest value of one instant query, one row per series (labels as columns)."""
    panel = (table.Panel().title(title).datasource(DATASOURCE).span(width).height(height).unit("none")
             .with_target(prometheus.Dataquery().expr(query.expr).legend_format(query.legend).ref_id("A")
                          .instant().format(PromQueryFormat.TABLE).datasource(DATASOURCE)))
    return panel.description(description) if description else panel


def capacity_line(panel: timeseries.Panel, series_regex: str) -> timeseries.Panel:
    """Draw the series matching ``series_regex`` as a dashed, unfilled red line (a link's capacity)."""
    return panel.override_by_regexp(series_regex, [
        DynamicConfigValue(id_val="custom.lineStyle", value={"fill": "dash", "dash": [10, 10]}),
        DynamicConfigValue(id_val="custom.fillOpacity", value=0),
        DynamicConfigValue(id_val="custom.lineWidth", value=2),
        DynamicConfigValue(id_val="color", value={"mode": "fixed", "fixedColor": "red"}),
    ])


def dashboard(uid: str, title: str, description: str) -> dash.Dashboard:
    return (dash.Dashboard(title).uid(uid).description(description).tags(["synclab"])
            .time("now-5m", "now").refresh("5s").timezone("browser").readonly()
            .tooltip(DashboardCursorSync.CROSSHAIR)
            .timepicker(dash.TimePicker().refresh_intervals(["1s", "5s", "10s", "30s", "1m"]))
            .variables(variables()))
