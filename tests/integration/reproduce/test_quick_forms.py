"""Every reproduction target runs from scratch and writes points.csv, its PNG and verdict.json (whatever the
verdict: the claims are judged by the run, not by this test).

In the suite each target runs the smallest form that still exercises it end to end — the quick form's first
point (each target puts its cheapest point first), an emulated one cut to two iterations (one warm-up, one measured: enough to
write every record and judge every claim, too few to trust a number) and to dilation D ≤ 2 (``--max-dilation``;
the rule's D = 64 made MG-WFBP Fig. 9's ResNet-152 point 228 s, 41 s capped at 8; P3 Fig. 7's VGG-19 point took 57 s
capped at 8 and 40 s at 2, side by side on the 2-core VM), under a minute on the 2-core VM;
``synclab reproduce TARGET --quick`` (docs/how-to/reproduce-a-figure.md) runs the whole quick form, and without
``--quick`` the full one."""

from __future__ import annotations

import json

import pytest

from support.cluster import synclab
from synclab.reproduce.schema import load_targets

pytestmark = pytest.mark.slow

MAX_D = 2  # the numbers are not judged here: the least dilation that runs every record
SMOKE = ["--set", "run.iterations=2", "--set", "run.warmup=1", "--max-dilation", str(MAX_D)]


@pytest.mark.parametrize(("target", "emulated"), [(t.id, t.engine == "emulate" or t.mixed) for t in load_targets()])
def test_quick_form_writes_its_files(target, emulated, tmp_path):
    out = tmp_path / target
    smoke = SMOKE if emulated else []  # a simulated or model point takes seconds as it is
    r = synclab("reproduce", target, "--quick", "--points", "1", *smoke, "--out", out, timeout=900)
    assert r.returncode == 0, r.stdout + r.stderr
    v = json.loads((out / "verdict.json").read_text())
    assert v["form"] == "quick" and v["target"] == target and v["points_reused"] == 0 and v["points"] == 1
    assert v["max_dilation"] == (MAX_D if emulated else None) and all(d <= MAX_D for d in v["dilation"].values())
    assert (out / v["figure_file"]).stat().st_size > 10_000
    rows = (out / "points.csv").read_text().splitlines()
    assert len(rows) == 1 + v["points"]
    assert all(c["verdict"] in {"reproduced", "partly", "not", "not run"} for c in v["claims"])
