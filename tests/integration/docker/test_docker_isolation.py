"""`synclab run --set network.isolation=docker`: the quick start with every node in a container.

Through the real CLI, with the image built from this checkout (``$SYNCLAB_IMAGE``, default
synclab:latest, on the local debootstrap base):

- the job ends ok with the records the other isolations write (summary, iterations, a traffic trace
  per node, a log per node from the container's output, status.json, network.json saying docker and
  each node's backend) and the final parameters of the same job run in network namespaces
  (loopback when this user cannot make namespaces);
- a node's container killed mid-job fails the job (status failed, the node named);
- Ctrl-C (SIGINT to the launcher) ends it as interrupted;
and in every case no container or network of the job is left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from integration.docker.conftest import BASE_ENV, DOCKER, DOCKER_SCRIPTS, sh

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
ITERATIONS = 6
NODES = ("coordinator", "ps0", "ps1", "worker0", "worker1")


@pytest.fixture(scope="module")
def image(docker_engine):
    """The node image built from this checkout (only the SyncLab image: the launcher needs no other)."""
    tag = os.environ.get("SYNCLAB_IMAGE", "synclab:latest")
    sh(str(DOCKER_SCRIPTS / "build.sh"), "coordinator",
       env={**os.environ, **BASE_ENV, "SYNCLAB_IMAGE": tag}, timeout=1500)
    return tag


def run_args(out: Path, *overrides: str) -> list[str]:
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(out), "--no-report"]
    for o in (f"run.iterations={ITERATIONS}", *overrides):
        args += ["--set", o]
    return args


def run(out: Path, *overrides: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(run_args(out, *overrides), cwd=REPO, env=env, capture_output=True, text=True, timeout=600)


def job_of(out: Path) -> str:
    return json.loads((out / "control.json").read_text())["docker_job"]


def left_behind(job: str) -> dict[str, list[str]]:
    label = f"label=io.synclab.job={job}"
    return {"containers": sh(DOCKER, "ps", "-aq", "--filter", label).stdout.split(),
            "networks": sh(DOCKER, "network", "ls", "-q", "--filter", label).stdout.split()}


@pytest.fixture
def env(image):
    return {**os.environ, "SYNCLAB_IMAGE": image}


def test_quickstart_in_containers_matches_the_netns_run(tmp_path, env):
    import torch

    docker_out, ref_out = tmp_path / "docker", tmp_path / "ref"
    r = run(docker_out, "network.isolation=docker", env=env)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "isolation docker" in " ".join(r.stderr.split())   # rich wraps lines
    reference = "netns" if os.geteuid() == 0 else "none"
    ref = run(ref_out, f"network.isolation={reference}", env=env)
    assert ref.returncode == 0, ref.stderr[-4000:]

    a = torch.load(docker_out / "params.pt", weights_only=False)
    b = torch.load(ref_out / "params.pt", weights_only=False)
    assert sorted(a) == sorted(b)
    for k in a:
        assert torch.allclose(a[k], b[k], rtol=1e-5, atol=0), k

    status = json.loads((docker_out / "status.json").read_text())
    assert status["status"] == "ok" and set(status["exit_codes"]) == set(NODES)
    assert all(code == 0 for code in status["exit_codes"].values())
    summary = json.loads((docker_out / "summary.json").read_text())
    assert summary["status"] == "ok" and summary["iterations"] == ITERATIONS
    assert summary["network_isolation"] == "docker"
    rows = (docker_out / "iterations.csv").read_text().splitlines()
    assert len(rows) == 1 + 2 * ITERATIONS   # header + one row per (worker, iteration)
    for node in NODES[1:]:
        assert (docker_out / f"traffic-{node}.csv").stat().st_size > 0
    for node in NODES:
        assert "link backend" in (docker_out / "logs" / f"{node}.log").read_text()
    net = json.loads((docker_out / "network.json").read_text())
    assert net["isolation"] == "docker" and set(net["nodes"]) == set(NODES)
    assert {n["backend"] for n in net["nodes"].values()} == {summary["network_backend"]}
    assert "@sha256:" in net["image"]
    engine_name = sh(DOCKER, "info", "--format", "{{.Name}}").stdout.strip()
    assert {n: (p["host"], p.get("image")) for n, p in summary["placement"].items()} == {
        n: (engine_name, net["image"]) for n in NODES}
    owner = docker_out.stat().st_uid
    assert all(p.stat().st_uid == owner for p in docker_out.rglob("*"))   # records stay the user's
    assert left_behind(job_of(docker_out)) == {"containers": [], "networks": []}


def _start(out: Path, env: dict, *overrides: str) -> subprocess.Popen:
    # The launcher sees a container end at once; the default heartbeat timeout keeps a node slowed down
    # by a busy host from failing the job first.
    return subprocess.Popen(run_args(out, "network.isolation=docker", "run.iterations=100000", *overrides),
                            cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_until_training(out: Path, proc: subprocess.Popen, timeout_s: float = 240) -> str:
    """Until every node registered (the coordinator's log says so for the last worker); the job id."""
    deadline = time.monotonic() + timeout_s
    log = out / "logs" / "coordinator.log"
    while not (log.exists() and "registered worker1" in log.read_text()):
        assert proc.poll() is None, proc.communicate()[1][-4000:]
        assert time.monotonic() < deadline, "the job did not start in time"
        time.sleep(0.5)
    time.sleep(3)  # a few iterations in
    return job_of(out)


def test_a_killed_node_container_fails_the_job_and_everything_is_removed(tmp_path, env):
    out = tmp_path / "killed"
    proc = _start(out, env)
    try:
        job = _wait_until_training(out, proc)
        sh(DOCKER, "kill", f"{job}-worker1")
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 1, stderr[-4000:]
    status = json.loads((out / "status.json").read_text())
    assert status["status"] == "failed" and "worker1" in status["reason"], status
    assert left_behind(job) == {"containers": [], "networks": []}


def test_ctrl_c_interrupts_the_job_and_everything_is_removed(tmp_path, env):
    out = tmp_path / "interrupted"
    proc = _start(out, env)
    try:
        job = _wait_until_training(out, proc)
        proc.send_signal(signal.SIGINT)
        _, stderr = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-4000:]
    assert json.loads((out / "status.json").read_text())["status"] == "interrupted"
    assert left_behind(job) == {"containers": [], "networks": []}


def test_no_daemon_is_a_clear_error_and_leaves_nothing(tmp_path, env):
    r = run(tmp_path / "nodaemon", "network.isolation=docker",
            env={**env, "DOCKER_HOST": f"unix://{tmp_path}/no-such.sock"})
    assert r.returncode == 1
    assert "cannot reach the Docker daemon" in r.stderr
