"""Whole-iteration and update timings (``profile_zoo.py --plain``, ``--update-only``), and the in-process zoo run."""

import json
import subprocess
import sys

import pytest
from support.scripts import REPO

from synclab.compute.profiler import measure_plain_iteration_seconds, measure_update_seconds


def test_plain_iterations_are_timed_after_the_warmup():
    out = measure_plain_iteration_seconds("mlp", batch_size=4, iterations=3, warmup=1)
    assert out["iterations"] == 3
    assert 0 < out["min"] <= out["median"] <= out["max"]
    assert out["relative_spread"] == pytest.approx((out["max"] - out["min"]) / out["median"])
    med, spread = measure_update_seconds("mlp", iterations=2, warmup=0)
    assert med == spread["median"] > 0


def test_in_process_zoo_writes_profiles_with_the_plain_iteration_and_tf32_in_meta(tmp_path):
    r = subprocess.run([sys.executable, str(REPO / "experiments" / "profile_zoo.py"), "--device", "cpu",
                        "--in-process", "--models", "mlp", "--batches", "primary", "--iterations", "1", "--warmup", "0",
                        "--plain", "2", "--tf32", "off", "--out-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    meta = json.loads((tmp_path / "mlp-b32-cpu.json").read_text())["meta"]
    assert meta["plain_iteration_seconds"]["iterations"] == 2 and meta["tf32"] == [False, False]
