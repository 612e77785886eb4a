"""The dashboard renderer's parts that need no server: units, ticks, the figure from a stand-in
Prometheus object, a bad Prometheus URL, and exit 2 for an unreachable one.

``synclab dashboards render`` against a stand-in Prometheus served over HTTP is tested in
tests/integration/dashboards/test_render.py."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from synclab.cli import app
from synclab.dashboards.renderer.figure import HONEST_LABEL, UnitLocator, figure, format_value
from synclab.dashboards.renderer.model import load_dashboard
from synclab.dashboards.renderer.prometheus import Prometheus, PrometheusUnreachable
from synclab.dashboards.renderer.query import take_snapshot

DASHBOARDS = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"


def _render(*args):
    return CliRunner().invoke(app, ["dashboards", "render", *args])


def test_unreachable_prometheus_exits_2_naming_it(tmp_path):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    r = _render(str(DASHBOARDS), "--prometheus", f"http://127.0.0.1:{port}", "--out", str(tmp_path),
                "--timeout", "5")
    assert r.exit_code == 2, r.output
    assert f"cannot reach Prometheus at http://127.0.0.1:{port}" in r.output
    r = _render(str(DASHBOARDS), "--prometheus", "localhost:9090", "--out", str(tmp_path))
    assert r.exit_code == 2 and "must look like http://host:port" in r.output


def test_client_errors():
    with pytest.raises(PrometheusUnreachable):
        Prometheus("ftp://x")


@pytest.mark.parametrize("value, unit, text", [
    (940e6, "bps", "940 Mbit/s"), (1e9, "bps", "1 Gbit/s"), (12.5e3, "Bps", "12.5 kB/s"),
    (3 * 2**20, "bytes", "3 MiB"), (0.085, "s", "85 ms"), (2.5, "s", "2.5 s"), (4.2e-4, "s", "420 µs"),
    (0.93, "percentunit", "93 %"), (12, "suffix: samples/s", "12 samples/s"), (0.5, "none", "0.5"),
    (0, "bps", "0"), (float("nan"), "s", "—"),
])
def test_units_as_grafana_formats_them(value, unit, text):
    assert format_value(value, unit) == text


def test_ticks_are_round_in_the_axis_unit():
    assert UnitLocator("bytes").tick_values(0, 12 * 2**20) == [i * 4 * 2**20 for i in range(4)]
    assert [format_value(t, "bps") for t in UnitLocator("bps").tick_values(0, 1e9)][-1] == "1 Gbit/s"


def test_the_figure_says_what_it_is_and_which_panels_are_empty(fake_prometheus):
    board = load_dashboard(DASHBOARDS / "synclab-training.json")
    snap = take_snapshot(board, fake_prometheus(empty=("synclab_training_loss",)), 0, 120)
    fig = figure(snap, caption="STRATEGY=p3 PROFILE=1gbit")
    texts = [t.get_text() for t in fig.texts]
    assert HONEST_LABEL in texts and "not a Grafana screenshot" in HONEST_LABEL
    assert "STRATEGY=p3 PROFILE=1gbit" in texts
    assert "no data" in texts and any("no data: training loss" in t for t in texts)
    # one plot per panel with data, its y axis labelled as the panel says
    labels = {ax.get_ylabel() for ax in fig.axes}
    assert {"seconds / iteration", "samples/s"} <= labels and "loss" not in labels
