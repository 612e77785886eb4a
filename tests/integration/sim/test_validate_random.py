"""``synclab validate --random N --seed S`` end to end in its smallest form: one drawn point (ResNet-20 replayed,
2 workers) run by the emulator at the D its own run picks and by the simulator with its defaults. Only that both
ran, at the rule's D, and that the files were written and are reused is asserted; the ratio is a validation
figure (docs/results/validation.md), not a test's."""

import csv
import subprocess
import sys

import pytest
import yaml

from synclab.validate.random_points import draw_points

pytestmark = pytest.mark.slow

ARGS = ["--random", "1", "--seed", "9", "--models", "resnet20", "--max-workers", "2", "--iterations", "6"]
COMMAND = [sys.executable, "-m", "synclab", "validate", *ARGS]


def test_one_drawn_point_is_run_by_both_at_its_own_dilation(tmp_path):
    r = subprocess.run([*COMMAND, "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    (p,) = draw_points(1, 9, models=("resnet20",), max_workers=2, iterations=6).points
    rows = list(csv.DictReader((tmp_path / "sim-vs-emu.csv").open()))
    assert len(rows) == 1 and not rows[0]["error"], rows
    row = rows[0]
    assert (row["name"], row["strategy"], int(row["workers"])) == (p.name, p.strategy, p.workers)
    assert float(row["emulated_s"]) > 0 and float(row["simulated_s"]) > 0
    # the emulator chose its D itself (no run.dilation was passed) and it is the rule's
    spec = yaml.safe_load((tmp_path / p.name / "emu" / "spec.yaml").read_text())
    assert float(spec["run"]["dilation"]) == p.dilation == float(row["dilation"])
    assert (tmp_path / "sim-vs-emu.png").stat().st_size > 0
    # a second run reuses both summaries: nothing runs again, the same row comes back
    again = subprocess.run([*COMMAND, "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and list(csv.DictReader((tmp_path / "sim-vs-emu.csv").open())) == rows
