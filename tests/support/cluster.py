"""Helpers for tests that launch real local clusters."""

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
QUICKSTART = REPO / "examples" / "quickstart.yaml"


def synclab(*args, timeout=300, **kw):
    return subprocess.run([sys.executable, "-m", "synclab", *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO, **kw)


def run_spec(out: Path, *overrides: str, timeout=300):
    args = ["run", QUICKSTART, "--out", out, "--no-report"]
    for o in overrides:
        args += ["--set", o]
    r = synclab(*args, timeout=timeout)
    if r.returncode != 0:  # a failing test shows what the nodes said, not only the CLI's one line
        r.stderr += "".join(f"\n--- {log.name} (tail) ---\n" + "\n".join(log.read_text(errors="replace").splitlines()[-25:])
                            for log in sorted(Path(out).glob("logs/*.log")))
    return r


def summary(out: Path) -> dict:
    return json.loads((out / "summary.json").read_text())


# Small and fast: the MLP, no shaping, a few iterations.
FAST = ["model.name=mlp", "model.batch_size=16", "network.rate=null", "run.iterations=6", "run.warmup=1"]
