"""Grafana provisioning without Grafana: the checked-in dashboards are what the code generates,
load back through the SDK's models, give every axis a unit, and point at the provisioned
datasource; the compose file and Prometheus configuration agree with them. No Docker needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from synclab.dashboards.promql import expand, load_queries

REPO = Path(__file__).resolve().parents[3]
DASHBOARDS = REPO / "grafana" / "dashboards"
PROVISIONING = REPO / "grafana" / "provisioning"


def _dashboards() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text()) for p in sorted(DASHBOARDS.glob("*.json"))}


def test_checked_in_dashboards_are_fresh():
    pytest.importorskip("grafana_foundation_sdk", reason="grafana-foundation-sdk (dev extra) generates them")
    from synclab.dashboards import stale

    assert stale(DASHBOARDS) == [], "regenerate: python -m synclab.dashboards grafana/dashboards"


def test_dashboards_load_into_the_sdk_model():
    sdk = pytest.importorskip("grafana_foundation_sdk.models.dashboard")
    for name, data in _dashboards().items():
        model = sdk.Dashboard.from_json(data)
        assert model.uid and model.title and model.panels, name


def test_network_training_scheduler_with_role_and_node_variables():
    boards = _dashboards()
    assert {b["uid"] for b in boards.values()} == {"synclab-network", "synclab-training", "synclab-scheduler"}
    for b in boards.values():
        assert {"role", "node"} <= {v["name"] for v in b["templating"]["list"]}, b["uid"]


def test_every_panel_has_units_and_the_provisioned_datasource():
    datasource = yaml.safe_load((PROVISIONING / "datasources" / "prometheus.yaml").read_text())["datasources"][0]
    for b in _dashboards().values():
        for p in b["panels"]:
            assert p["datasource"]["uid"] == datasource["uid"], (b["uid"], p["title"])
            defaults = p["fieldConfig"]["defaults"]
            assert defaults.get("unit"), (b["uid"], p["title"])
            if p["type"] == "timeseries":
                assert defaults["custom"].get("axisLabel"), (b["uid"], p["title"])


def test_network_dashboard_has_one_panel_per_node_with_the_link_rate():
    net = _dashboards()["synclab-network.json"]
    repeated = [p for p in net["panels"] if p.get("repeat") == "node"]
    assert len(repeated) == 1
    exprs = " ".join(t["expr"] for t in repeated[0]["targets"])
    for metric in ("synclab_interface_transmit_bytes_total", "synclab_interface_receive_bytes_total",
                   "synclab_link_rate_bits_per_second"):
        assert metric in exprs


def test_queries_expand_to_plain_promql():
    queries = load_queries(DASHBOARDS)
    assert len(queries) >= 15
    for q in queries:
        out = expand(q.expr, {"role": ".*", "node": "worker0", "window": "10s"})
        assert "$" not in out, out


def test_dashboard_provider_points_where_compose_mounts_the_json():
    provider = yaml.safe_load((PROVISIONING / "dashboards" / "synclab.yaml").read_text())["providers"][0]
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    mounts = compose["services"]["grafana"]["volumes"]
    assert f"./grafana/dashboards:{provider['options']['path']}:ro" in mounts
    assert "./grafana/provisioning:/etc/grafana/provisioning:ro" in mounts


def test_prometheus_scrapes_every_synclab_service_each_second():
    prom = yaml.safe_load((REPO / "prometheus" / "prometheus.yml").read_text())
    assert prom["global"]["scrape_interval"] == "1s"
    names = {n for job in prom["scrape_configs"] for sd in job.get("dns_sd_configs", []) for n in sd["names"]}
    compose = yaml.safe_load((REPO / "docker-compose.yml").read_text())
    assert {"coordinator", "worker", "ps"} <= names <= set(compose["services"])
