"""experiments/ring_goodput.py run as a script writes the ring-goodput table the simulator reads."""

from __future__ import annotations

from pathlib import Path

from synclab.sim.run import parse_ring_goodput

REPO = Path(__file__).resolve().parents[3]


def test_the_calibration_script_writes_the_table_the_simulator_reads(tmp_path):
    import subprocess
    import sys

    measured = tmp_path / "allreduce.csv"
    measured.write_text("link,backend,ranks,mbytes,ring_bound_s,gloo_s,synclab_s\n"
                        "experiments/links/e125mbit.yaml,tbf,8,2.408996,0.2698,0.2875,0.3309\n")
    out = tmp_path / "ring-goodput.csv"
    r = subprocess.run([sys.executable, str(REPO / "experiments" / "ring_goodput.py"), str(measured),
                        "--out", str(out)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 0, r.stderr
    table = parse_ring_goodput(str(out))
    assert list(table) == [8] and table[8][0][0] == 301124 and 0.8 < table[8][0][1] < 0.95
