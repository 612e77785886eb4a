"""The all-reduce benchmark (issue 12 item 1) runs end to end in its smallest form: gloo and SyncLab's ring in
real namespaces on a tbf link, every rank's sum checked by the benchmark itself, the files written.

Only that it ran and what it wrote are asserted; the speed ratio is a benchmark figure, not a test's."""

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.netns, pytest.mark.slow]

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "allreduce_vs_gloo.py"


def test_smallest_form_runs_gloo_and_the_ring_and_writes_its_files(kernel_backends, tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--links", "1gbit", "--ranks", "2", "--floats", "200000",
                        "--repeats", "1", "--out", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    rows = list(csv.DictReader((tmp_path / "allreduce.csv").open()))
    assert len(rows) == 1 and rows[0]["link"] == "1gbit" and rows[0]["ranks"] == "2"
    assert rows[0]["backend"] in ("tbf", "htb", "netem")
    assert float(rows[0]["gloo_s"]) > 0 and float(rows[0]["synclab_s"]) > 0
    assert float(rows[0]["ring_bound_s"]) == pytest.approx(2 * 1 / 2 * 200000 * 4 * 8 / 1e9)
    assert json.loads((tmp_path / "allreduce.json").read_text())[0]["synclab_all_s"]
    assert (tmp_path / "allreduce.png").stat().st_size > 0


def test_bad_arguments_exit_with_a_message(tmp_path):
    r = subprocess.run([sys.executable, str(SCRIPT), "--ranks", "1", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "--ranks" in r.stderr
