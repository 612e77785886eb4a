"""``synclab profile --zoo --in-process`` run as a command: profiles with the plain iteration and tf32 recorded in meta."""

import json
import subprocess
import sys


def test_in_process_zoo_writes_profiles_with_the_plain_iteration_and_tf32_in_meta(tmp_path):
    r = subprocess.run([sys.executable, "-m", "synclab", "profile", "--zoo", "--device", "cpu",
                        "--in-process", "--models", "mlp", "--batches", "primary", "--iterations", "1", "--warmup", "0",
                        "--plain", "2", "--tf32", "off", "--out-dir", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr[-2000:]
    meta = json.loads((tmp_path / "mlp-b32-cpu.json").read_text())["meta"]
    assert meta["plain_iteration_seconds"]["iterations"] == 2 and meta["tf32"] == [False, False]
