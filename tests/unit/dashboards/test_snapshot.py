"""Running a dashboard's PromQL the way Grafana would: variables, macros, repeats, instant tables,
"no data" detection, and clear refusals of malformed dashboard files."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from synclab.dashboards.promql import expand
from synclab.dashboards.renderer.model import DashboardError, load_dashboard
from synclab.dashboards.renderer.query import auto_step, legend_name, parse_time, resolve_variables, take_snapshot
from synclab.dashboards.renderer.saved import load_saved, write_data

DASHBOARDS = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"
def test_macros_follow_the_step_and_scrape_interval():
    expr = "rate(x[$__rate_interval]) + rate(y[$__interval]) + z[$__range] + $window"
    assert expand(expr, {"window": "10s"}) == "rate(x[4000ms]) + rate(y[1000ms]) + z[300000ms] + 10s"
    # $__rate_interval = max(4 × scrape, $__interval + scrape)
    assert "x[6000ms]" in expand(expr, {"window": "1m"}, interval_s=5, range_s=3600)
    assert "y[5000ms]" in expand(expr, {"window": "1m"}, interval_s=5, range_s=3600)
    assert "z[3600000ms]" in expand(expr, {"window": "1m"}, interval_s=5, range_s=3600)
    assert "x[8000ms]" in expand(expr, {"window": "1m"}, scrape_interval_s=2)
    with pytest.raises(KeyError, match=r"\$window"):
        expand(expr, {})


def test_durations_times_and_steps():
    assert parse_time("now", 1000.0) == 1000.0
    assert parse_time("now-5m", 1000.0) == 700.0
    assert parse_time("now+30s", 1000.0) == 1030.0
    assert parse_time("1795457000", 0) == 1795457000.0
    assert parse_time("2026-11-23T18:00:00Z", 0) == parse_time("2026-11-23T18:00:00", 0) == 1795456800.0
    with pytest.raises(ValueError, match="cannot parse time"):
        parse_time("yesterday", 0)
    with pytest.raises(ValueError, match="cannot parse duration"):
        parse_time("now-5", 0)
    assert auto_step(300, 1.0) == 1.0          # 5 min on ~1000 px: one scrape interval
    assert auto_step(1800, 1.0) == 2.0         # 30 min: Grafana rounds 1.8 s to 2 s
    assert auto_step(6 * 3600, 1.0) == 20.0
    assert auto_step(300, 5.0) == 5.0


def test_legend_format():
    labels = {"__name__": "m", "node": "worker0", "peer": "ps1"}
    assert legend_name("{{node}} → {{ peer }}", labels) == "worker0 → ps1"
    assert legend_name("link rate {{direction}}", labels) == "link rate "
    assert legend_name("", labels) == 'm{node="worker0", peer="ps1"}'
    assert legend_name("__auto", {"node": "a"}) == '{node="a"}'


def test_the_checked_in_dashboards_load():
    boards = {p.name: load_dashboard(p) for p in sorted(DASHBOARDS.glob("*.json"))}
    assert set(boards) == {"synclab-network.json", "synclab-training.json", "synclab-scheduler.json"}
    net = boards["synclab-network.json"]
    per_node = next(p for p in net.panels if p.repeat)
    assert per_node.repeat == "node" and per_node.max_per_row == 2 and per_node.unit == "bps"
    assert per_node.override_for("link rate egress").dashed and per_node.override_for("link rate egress").color == "red"
    assert per_node.override_for("tx") is None
    assert next(p for p in net.panels if p.type == "table").targets[0].instant
    training = boards["synclab-training.json"]
    breakdown = next(p for p in training.panels if p.title.startswith("computation"))
    assert breakdown.bars and breakdown.stacked and breakdown.unit == "s"
    assert {v.name for v in net.variables} == {"role", "node", "window"}


def test_all_means_the_all_value_in_queries_and_every_node_for_repeats(fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-network.json")
    fake = fake_prometheus()
    variables = resolve_variables(board, fake, 0, 300)
    assert variables["role"].text == ".*" and variables["node"].text == ".*"
    # natural order, as the node variable asks
    assert variables["node"].values == ("coordinator", "ps0", "ps1", "worker2", "worker10")
    assert variables["window"].text == "10s"
    # the node query follows role: $role expanded before label_values is asked
    assert ("node", 'synclab_interface_transmit_bytes_total{role=~".*"}') in fake.labels
    chosen = resolve_variables(board, fake, 0, 300, {"node": ["worker2", "worker10"], "window": ["1m"]})
    assert chosen["node"].text == "(worker2|worker10)" and chosen["node"].values == ("worker2", "worker10")
    assert chosen["window"].text == "1m"
    with pytest.raises(DashboardError, match="no variable nope"):
        resolve_variables(board, fake, 0, 300, {"nope": ["1"]})


def test_snapshot_runs_every_target_as_grafana_would(fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-network.json")
    fake = fake_prometheus(empty=('node="coordinator"',))
    snap = take_snapshot(board, fake, 1000.4, 1300.2, source_name="fake")
    assert snap.step_s == 1.0 and (snap.start, snap.end) == (1000.0, 1300.0)  # aligned to the step
    per_node = [p for p in snap.panels if p.panel.repeat]
    assert [p.title for p in per_node] == [f"tx / rx — {n}" for n in ("coordinator", "ps0", "ps1", "worker2",
                                                                       "worker10")]
    assert all(f'node="{n}"' in t.query for p, n in zip(per_node, ("coordinator", "ps0")) for t in p.targets)
    sent = [q for q, *_ in fake.ranges]
    assert all("$" not in q for q in sent) and any("[4000ms]" in q for q in sent)
    assert all((start, end, step) == (1000.0, 1300.0, 1.0) for _, start, end, step in fake.ranges)
    assert fake.instants and fake.instants[0][1] == 1300.0  # the table: an instant query at the end
    assert [p.title for p in snap.empty_panels] == ["tx / rx — coordinator"]
    cells = [p.cell for p in snap.panels]
    assert not any(a.overlaps(b) for i, a in enumerate(cells) for b in cells[i + 1:])
    table = next(p for p in snap.panels if p.panel.type == "table")
    assert [s.labels["node"] for s in table.series] == ["ps0", "worker2"]


def test_nan_and_inf_are_no_data(tmp_path, fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-training.json")

    class NaNs(fake_prometheus):
        def query_range(self, expr, start, end, step_s):
            return [{"metric": {"node": "worker0"}, "values": [[start, "NaN"], [end, "+Inf"]]}]

    snap = take_snapshot(board, NaNs(), 0, 60)
    assert len(snap.empty_panels) == len(snap.panels)
    csv_path, json_path = write_data(snap, tmp_path / "training")
    doc = json.loads(json_path.read_text())
    assert doc["no_data"] == [p.title for p in snap.panels]
    assert doc["panels"][0]["targets"][0]["series"][0]["values"][0][1] is None
    assert "not a Grafana screenshot" in doc["rendered_by"]
    assert csv_path.read_text().splitlines()[0] == "panel,ref_id,series,time_s,time_utc,value"


def test_write_data_keeps_every_sample(tmp_path, fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-scheduler.json")
    snap = take_snapshot(board, fake_prometheus(), 0, 30)
    csv_path, json_path = write_data(snap, tmp_path / "s")
    rows = csv_path.read_text().splitlines()[1:]
    samples = sum(len(s.times) for p in snap.panels for s in p.series)
    assert len(rows) == samples > 0
    doc = json.loads(json_path.read_text())
    assert doc["step_s"] == 1.0 and doc["variables"]["node"]["all"] is True
    q = doc["panels"][0]["targets"][0]
    assert q["expr"].count("$") > 0 and "$" not in q["query"]
    assert not math.isnan(doc["panels"][0]["targets"][0]["series"][0]["values"][1][1])


@pytest.mark.parametrize("text, problem", [
    ("{not json", "not valid JSON"),
    ("[1, 2]", "a dashboard is a JSON object"),
    ('{"title": "x"}', 'no "panels" list'),
    ('{"panels": [{"title": "a", "type": "timeseries"}]}', "panel 'a': \"gridPos\" needs integer"),
    ('{"panels": [{"title": "b", "gridPos": {"x": 0, "y": 0, "w": 0, "h": 4}}]}', "panel 'b'"),
    ('{"panels": [{"title": "c", "gridPos": {"x": 0, "y": 0, "w": 4, "h": 4}, "targets": [{"expr": 3}]}]}',
     "non-string \"expr\""),
    ('{"panels": [{"title": "d", "gridPos": {"x": 0, "y": 0, "w": 4, "h": 4}, "fieldConfig": '
     '{"defaults": {"min": "zero"}}}]}', '"min" must be a number'),
    ('{"panels": [{"title": "e", "gridPos": {"x": 0, "y": 0, "w": 4, "h": 4}}], "templating": {"list": [{}]}}',
     "has no name"),
])
def test_malformed_dashboards_are_refused_by_name(tmp_path, text, problem):
    path = tmp_path / "broken.json"
    path.write_text(text)
    with pytest.raises(DashboardError) as e:
        load_dashboard(path)
    assert str(path) in str(e.value) and problem in str(e.value)


def test_a_variable_query_the_renderer_cannot_evaluate_names_the_variable(tmp_path, fake_prometheus):
    path = tmp_path / "d.json"
    path.write_text(json.dumps({"panels": [{"title": "p", "gridPos": {"x": 0, "y": 0, "w": 4, "h": 4},
                                            "targets": [{"expr": "up{job=~\"$job\"}", "refId": "A"}]}],
                                "templating": {"list": [{"name": "job", "type": "query",
                                                         "query": "query_result(up)", "current": {"value": "$__all"}}]}}))
    with pytest.raises(DashboardError, match=r"variable 'job'.*--var job=VALUE"):
        take_snapshot(load_dashboard(path), fake_prometheus(), 0, 60)


def test_saved_answers_draw_the_same_snapshot_again(tmp_path, fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-network.json")
    first = take_snapshot(board, fake_prometheus(empty=('node="coordinator"',)), 1000, 1120, source_name="live")
    _, json_path = write_data(first, tmp_path / "net")
    saved = load_saved(json_path, board)
    again = take_snapshot(board, saved, saved.start, saved.end, step_s=saved.step_s,
                          scrape_interval_s=saved.scrape_interval_s, given=saved.given())
    assert [(p.title, p.cell) for p in again.panels] == [(p.title, p.cell) for p in first.panels]
    assert [[(s.name, s.times, s.values) for s in p.series] for p in again.panels] == \
        [[(s.name, s.times, s.values) for s in p.series] for p in first.panels]
    assert [p.title for p in again.empty_panels] == ["tx / rx — coordinator"]
    other = load_dashboard(DASHBOARDS / "synclab-training.json")
    with pytest.raises(DashboardError, match="is a snapshot of dashboard 'synclab-network'"):
        load_saved(json_path, other)
    doc = json.loads(json_path.read_text())
    doc["panels"][0]["targets"][0]["query"] = "something else"
    json_path.write_text(json.dumps(doc))
    with pytest.raises(DashboardError, match="no saved answer to"):
        take_snapshot(board, load_saved(json_path, board), saved.start, saved.end, given=saved.given())
