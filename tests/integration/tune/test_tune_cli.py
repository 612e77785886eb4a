"""``synclab tune`` in its smallest form from the command line: three simulated trials of the quick start,
the best one and the spec as given confirmed with real ``synclab run`` jobs (under the emulation lock)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the two emulated runs each wait for the host's emulation lock
def test_tune_smallest_form(tmp_path):
    out = tmp_path / "tune"
    r = subprocess.run([sys.executable, "-m", "synclab", "tune", "quickstart", "--param",
                        "transport.chunk_bytes=65536:4194304:log", "--trials", "3", "--confirm", "1",
                        "--confirm-iterations", "4", "--set", "network.isolation=none", "--out", str(out)],
                       capture_output=True, text=True, timeout=1700)
    assert r.returncode == 0, r.stdout + r.stderr
    d = json.loads((out / "tune.json").read_text())
    assert len(d["trials"]) == 3 and d["best"]["value"] > 0
    assert [c["name"] for c in d["confirmed"]] == ["default", f"trial{d['best']['number']}"]
    for c in d["confirmed"]:
        assert c["status"] == "ok" and c["value"] > 0
        summary = json.loads((out / "emulated" / c["name"] / "summary.json").read_text())
        assert summary["iterations"] == 4 and not summary.get("simulated")
    assert (out / "tune.png").stat().st_size > 0


def test_tune_refuses_a_non_numeric_key_with_exit_2(tmp_path):
    r = subprocess.run([sys.executable, "-m", "synclab", "tune", "quickstart", "--param", "network.isolation=1:2",
                        "--out", str(tmp_path / "t")], capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "network.isolation" in r.stderr and "not a numeric key" in r.stderr
    assert not (tmp_path / "t").exists()
