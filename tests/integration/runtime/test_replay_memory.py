"""benchmarks/replay_memory.py: every node process of a real local run is seen, with its kernel-reported peak."""

from pathlib import Path

import pytest

from support.cluster import FAST
from support.scripts import load_script

REPO = Path(__file__).resolve().parents[3]


def test_role_of_reads_the_launchers_command_lines():
    m = load_script("benchmarks/replay_memory.py")
    assert m.role_of(["python", "-m", "synclab", "worker", "--rank", "3", "--coordinator", "a:1"]) == ("worker", 3)
    assert m.role_of(["ip", "netns", "exec", "n", "python", "-m", "synclab", "ps", "--shard", "1"]) == ("ps", 1)
    assert m.role_of(["python", "-m", "synclab", "coordinator", "--spec", "s.yaml"]) == ("coordinator", None)
    assert m.role_of(["python", "-m", "synclab", "run", "spec.yaml"]) is None
    assert m.role_of(["python", "benchmarks/replay_memory.py"]) is None


@pytest.mark.slow
def test_a_ps_run_reports_every_process_peak(tmp_path):
    m = load_script("benchmarks/replay_memory.py")
    r = m.measure(REPO / "examples" / "quickstart.yaml", ["strategy.name=ps", "cluster.workers=2", *FAST], tmp_path,
                  period_s=0.2)
    assert r["rc"] == 0, (tmp_path / "run.log").read_text()[-2000:]
    seen = sorted((p["role"], p["rank"]) for p in r["processes"])
    assert seen == [("coordinator", None), ("ps", 0), ("ps", 1), ("worker", 0), ("worker", 1)]
    # a Python process that imported torch holds tens of MiB at least; the sum adds every peak
    assert all(p["peak_mib"] > 20 for p in r["processes"])
    assert r["sum_of_peaks_mib"] == sum(p["peak_mib"] for p in r["processes"])
    for role, key in (("worker", "largest_worker_mib"), ("ps", "largest_shard_mib")):
        assert r[key] == max(p["peak_mib"] for p in r["processes"] if p["role"] == role)
    assert 0 < r["min_available_mib"]
