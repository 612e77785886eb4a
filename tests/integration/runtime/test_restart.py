"""Crash and restart with nothing lost: `kill -9` of a PS shard, a worker or the coordinator mid-run.

With ``run.checkpoint_every`` and ``run.restart: on-failure`` the launcher restarts
the job from its last consistent checkpoint; the final parameters must equal
those of an uninterrupted run (rtol 1e-5; in practice bit for bit) and every
iteration must be reported exactly once per worker.
"""

import csv
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter

import pytest
import torch

from integration.runtime.test_failures import _child_pid
from support.cluster import FAST, QUICKSTART, REPO, run_spec

pytestmark = pytest.mark.slow

ITERATIONS, EVERY = 40, 5
SETTINGS = [*FAST, f"run.iterations={ITERATIONS}", "cluster.workers=2", "cluster.ps_shards=2"]


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """params.pt of runs without checkpoints or crashes, per strategy."""
    runs = {}
    for strategy in ("ps", "wfbp", "mgwfbp"):
        out = tmp_path_factory.mktemp(f"plain-{strategy}")
        r = run_spec(out, *SETTINGS, f"strategy.name={strategy}")
        assert r.returncode == 0, r.stderr
        runs[strategy] = torch.load(out / "params.pt")
    return runs


def _start(out, strategy):
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(out), "--no-report"]
    for o in [*SETTINGS, f"strategy.name={strategy}", f"run.checkpoint_every={EVERY}", "run.restart=on-failure"]:
        args += ["--set", o]
    return subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_checkpoint(out, proc, at_least, timeout=180):
    latest = out / "checkpoint" / "LATEST"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if latest.exists() and int(latest.read_text() or 0) >= at_least:
            return int(latest.read_text())
        assert proc.poll() is None, proc.communicate()[1]
        time.sleep(0.05)
    raise AssertionError("no checkpoint was completed")


VICTIMS = {"ps0": ("ps", "--shard", "0"), "worker0": ("worker", "--rank", "0"), "worker1": ("worker", "--rank", "1"),
           "coordinator": ("coordinator", "--spec")}


@pytest.mark.parametrize("strategy, victim", [("ps", "ps0"), ("wfbp", "worker1"), ("ps", "coordinator"),
                                              ("mgwfbp", "worker0")])
def test_killed_node_resumes_from_checkpoint_with_nothing_lost(tmp_path, uninterrupted, strategy, victim):
    proc = _start(tmp_path, strategy)
    try:
        done = _wait_for_checkpoint(tmp_path, proc, 2 * EVERY)
        os.kill(_child_pid(proc.pid, *VICTIMS[victim]), signal.SIGKILL)
        _, err = proc.communicate(timeout=300)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    status = json.loads((tmp_path / "status.json").read_text())
    (restart,) = status["restarts"]
    assert victim in restart["reason"] and restart["resumed_from"] >= done
    assert (tmp_path / "logs-attempt1" / f"{victim}.log").exists()
    params = torch.load(tmp_path / "params.pt")
    for k, v in uninterrupted[strategy].items():
        torch.testing.assert_close(params[k], v, rtol=1e-5, atol=0)
    with open(tmp_path / "iterations.csv") as f:
        seen = Counter((int(r["rank"]), int(r["iteration"])) for r in csv.DictReader(f))
    assert seen == Counter({(rank, it): 1 for rank in range(2) for it in range(1, ITERATIONS + 1)})


def test_without_restart_a_crash_fails_cleanly_and_keeps_its_checkpoints(tmp_path):
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(tmp_path), "--no-report"]
    for o in [*SETTINGS, "strategy.name=ps", f"run.checkpoint_every={EVERY}", "run.iterations=100000"]:
        args += ["--set", o]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        done = _wait_for_checkpoint(tmp_path, proc, EVERY)
        os.kill(_child_pid(proc.pid, "ps", "--shard", "1"), signal.SIGKILL)
        proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "failed" and "ps1" in status["reason"] and "restarts" not in status
    latest = int((tmp_path / "checkpoint" / "LATEST").read_text())
    assert latest >= done
    assert {p.name for p in (tmp_path / "checkpoint" / f"{latest:08d}").iterdir()} == {
        "coordinator.pt", "ps0.pt", "ps1.pt", "worker0.pt", "worker1.pt"}
