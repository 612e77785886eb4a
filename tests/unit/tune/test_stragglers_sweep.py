"""synclab.stragglers.sweep on a small simulated spec: the reference point, the bounds, the records."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from synclab.stragglers.sweep import COLUMNS, sweep, write

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
SETS = ["compute.mode=replay", "model.name=resnet50", "compute.scale=0.05", "run.iterations=5", "run.warmup=1",
        "cluster.workers=3", "cluster.ps_shards=3", "network.rate=100gbit"]


def test_sweep_rows_and_records(tmp_path):
    rows = sweep(QUICKSTART, ["ps", "asgd"], [3.0], overrides=SETS)
    assert [(r["strategy"], r["factor"]) for r in rows] == [("ps", 1.0), ("ps", 3.0), ("asgd", 1.0), ("asgd", 3.0)]
    ps, asgd = rows[1], rows[3]
    assert rows[0]["relative"] == 1.0 and ps["lockstep_bound"] == pytest.approx(1 / 3)
    assert ps["independent_bound"] == pytest.approx((2 + 1 / 3) / 3)
    # the lockstep baseline loses far more than the asynchronous one, which stays near its bound
    assert ps["relative"] < 0.6 and asgd["relative"] == pytest.approx(asgd["independent_bound"], rel=0.1)
    assert ps["others_wait_for_slow_s"] > 0 and asgd["others_wait_for_slow_s"] == 0
    csv_path, png = write(rows, tmp_path)
    got = list(csv.DictReader(csv_path.open()))
    assert tuple(got[0]) == COLUMNS and len(got) == 4 and png.stat().st_size > 0


def test_sweep_refuses_bad_factors():
    with pytest.raises(ValueError, match="factors"):
        sweep(QUICKSTART, ["ps"], [0.0], overrides=SETS)
