"""The simulator-vs-emulator comparison (``synclab validate grid``, issue 14 item 3) runs end to end in its smallest form: one strategy, one
point, the emulator (real processes and links) and the simulator on the same spec. Only that it ran and wrote
its files is asserted; the ratio is a validation figure (docs/results/validation.md), not a test's."""

import csv
import subprocess
import sys

import pytest

pytestmark = pytest.mark.slow

SCRIPT = [sys.executable, "-m", "synclab", "validate", "grid"]


def test_one_point_is_run_by_both_and_compared(tmp_path):
    r = subprocess.run([*SCRIPT, "--strategies", "wfbp", "--workers", "2", "--iterations", "4",
                        "--out", str(tmp_path)], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader((tmp_path / "sim-vs-emu.csv").open()))
    assert len(rows) == 1 and not rows[0]["error"], rows
    assert float(rows[0]["emulated_s"]) > 0 and float(rows[0]["simulated_s"]) > 0
    assert float(rows[0]["ratio"]) == pytest.approx(float(rows[0]["simulated_s"]) / float(rows[0]["emulated_s"]))
    assert (tmp_path / "sim-vs-emu.png").stat().st_size > 0
    # a second run reuses both summaries: nothing is run again
    again = subprocess.run([*SCRIPT, "--strategies", "wfbp", "--workers", "2", "--iterations",
                            "4", "--out", str(tmp_path)], capture_output=True, text=True, timeout=120)
    assert again.returncode == 0 and list(csv.DictReader((tmp_path / "sim-vs-emu.csv").open())) == rows
