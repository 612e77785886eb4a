"""The 'traffic' figure layout (P3 Fig. 8/9): bars of utilization shares per point and each point's
10 ms tx/rx trace; schema checks of 'bars'."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from synclab.reproduce.figure import draw
from synclab.reproduce.schema import TargetError, load_target
from synclab.resources import targets_dir

ROOT = Path(__file__).resolve().parents[3]


def _data() -> dict:
    return yaml.safe_load((targets_dir() / "p3-fig8-9.yaml").read_text())


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "p3-fig8-9.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def _record(name: str, idle: float, trace: bool) -> dict:
    extra = {}
    if trace:
        extra = {"trace_t_s": [0.0, 0.01, 0.02], "trace_tx_gbps": [4.0, 0.0, 2.0],
                 "trace_rx_gbps": [0.0, 4.0, 2.0], "util_link_bps": 4e9}
    return {"values": {"network.rate": "4gbit", "strategy.name": name},
            "metrics": {"idle_share": idle, "overlap_share": 0.5, "tx_util": 0.6, "rx_util": None},
            "extra": extra}


def test_traffic_layout_draws_bars_and_traces(tmp_path):
    t = load_target(targets_dir() / "p3-fig8-9.yaml")
    assert t.figure_spec.layout == "traffic" and "overlap_share" in t.figure_spec.bars
    png = draw(t, [_record("ps", 0.3, True), _record("p3", 0.1, True)], tmp_path / "a.png", quick=True)
    bars_only = draw(t, [_record("ps", 0.3, False)], tmp_path / "b.png", quick=True)
    from matplotlib.image import imread

    tall, short = imread(png), imread(bars_only)
    assert tall.shape[0] > short.shape[0]  # one trace panel per traced point below the bars


def test_bars_are_for_the_traffic_layout_only(tmp_path):
    data = _data()
    data["plot"]["layout"] = "lines"
    with pytest.raises(TargetError, match="'bars' is for layout 'traffic' only"):
        load_target(_write(tmp_path, data))


def test_unknown_layout_is_refused(tmp_path):
    data = _data()
    data["plot"]["layout"] = "timeline"
    with pytest.raises(TargetError, match="plot.layout"):
        load_target(_write(tmp_path, data))
