"""Every reproduction target runs from scratch and writes points.csv, its PNG and verdict.json (whatever the
verdict: the claims are judged by the run, not by this test).

In the suite each target runs the smallest form that still exercises it end to end — the quick form's first
point (each target puts its cheapest point first), about a minute on the 2-core VM; ``synclab reproduce TARGET --quick`` (README "Reproducing the
papers") runs the whole quick form, and without ``--quick`` the full one."""

from __future__ import annotations

import json

import pytest

from synclab.reproduce.schema import load_targets
from support.cluster import REPO, synclab

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("target", [t.id for t in load_targets(REPO)])
def test_quick_form_writes_its_files(target, tmp_path):
    out = tmp_path / target
    r = synclab("reproduce", target, "--quick", "--points", "1", "--out", out, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    v = json.loads((out / "verdict.json").read_text())
    assert v["form"] == "quick" and v["target"] == target and v["points_reused"] == 0 and v["points"] == 1
    assert (out / v["figure_file"]).stat().st_size > 10_000
    rows = (out / "points.csv").read_text().splitlines()
    assert len(rows) == 1 + v["points"]
    assert all(c["verdict"] in {"reproduced", "partly", "not", "not run"} for c in v["claims"])
