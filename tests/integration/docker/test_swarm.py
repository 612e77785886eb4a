"""The same docker-compose.yml as a Docker Swarm stack, for real, on a single-node swarm: compose merges
docker-compose.swarm.yml and interpolates, scripts/docker/stack-file.py makes the result a stack
file, `docker stack deploy` runs it; a job runs to completion with its run records, every task
shapes its link, and Prometheus (published in host mode) scrapes every node over the overlay.

The test puts the daemon into swarm mode only when it was not (and leaves it again); a daemon that
cannot start a swarm skips the test with the reason, or fails it under SYNCLAB_REQUIRE_DOCKER=1 (as CI runs).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

WORKERS, SHARDS, ITERATIONS = 2, 2, 20
NODES = {"coordinator", *(f"worker{i}" for i in range(WORKERS)), *(f"ps{i}" for i in range(SHARDS))}
SERVICES = ("coordinator", "worker", "ps", "prometheus")
STACK_FILE_SCRIPT = Path(__file__).resolve().parents[3] / "scripts" / "docker" / "stack-file.py"
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")


def sh(*cmd: str, check: bool = True, timeout: float = 60) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert not check or r.returncode == 0, f"`{' '.join(cmd)}` exited {r.returncode}: {r.stderr[-2000:]}"
    return r


def _swarm_state() -> str:
    return sh(DOCKER, "info", "--format", "{{.Swarm.LocalNodeState}}", check=False).stdout.strip()


def _advertise_address() -> list[str]:
    """--advertise-addr for the address of the default route (a host with several addresses needs one)."""
    out = sh("ip", "-4", "route", "get", "192.0.2.1", check=False).stdout.split()
    return ["--advertise-addr", out[out.index("src") + 1]] if "src" in out else []


@pytest.fixture(scope="module")
def single_node_swarm(docker_engine, docker_unavailable):
    """This daemon as a one-node swarm manager; left again afterwards if the test made it one."""
    joined_here = False
    had_gwbridge = sh(DOCKER, "network", "inspect", "docker_gwbridge", check=False).returncode == 0
    if _swarm_state() != "active":
        r = sh(DOCKER, "swarm", "init", *_advertise_address(), check=False, timeout=120)
        if r.returncode != 0:
            docker_unavailable(f"`docker swarm init` is not possible on this daemon: {r.stderr.strip()[:500]}")
        joined_here = True
    try:
        yield
    finally:
        if joined_here:
            sh(DOCKER, "swarm", "leave", "--force", check=False, timeout=120)
            if not had_gwbridge:  # swarm init made it; leaving keeps it
                sh(DOCKER, "network", "rm", "docker_gwbridge", check=False)


def _tasks(c) -> list[dict]:
    out = c.docker("stack", "ps", c.project, "--no-trunc", "--format", "{{json .}}", check=False).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


@pytest.fixture(scope="module")
def stack(images, single_node_swarm, compose_project, tmp_path_factory):
    c = compose_project("swarm", PROFILE="1gbit", WORKERS=str(WORKERS), SHARDS=str(SHARDS),
                        ITERATIONS=str(ITERATIONS), REPEAT="1",
                        # Workers and shards keep /metrics up 5 s after the few-second job, so Prometheus (1 s
                        # scrapes, DNS discovery every second) samples every node even when one resolves late.
                        SPEC_SET="run.warmup=2 run.linger_s=5")
    config = c.compose("-f", "docker-compose.yml", "-f", "docker-compose.swarm.yml",
                       "-f", "docker-compose.swarm-prometheus.yml",  # the test reads Prometheus from the host
                       "config", "--format", "json", *SERVICES).stdout
    converted = subprocess.run([sys.executable, str(STACK_FILE_SCRIPT)], input=config,
                               capture_output=True, text=True, check=True).stdout
    stack_file = tmp_path_factory.mktemp("swarm") / "stack.json"
    stack_file.write_text(converted)
    try:
        c.docker("stack", "deploy", "--resolve-image", "never", "-c", str(stack_file), c.project, timeout=180)
        t_start = time.time()
        deadline = time.monotonic() + 600
        while True:
            tasks = _tasks(c)
            coordinator = [t for t in tasks if t["Name"].startswith(f"{c.project}_coordinator.")]
            if any(t["CurrentState"].startswith(("Failed", "Rejected")) for t in tasks) or (
                    coordinator and all(t["CurrentState"].startswith("Complete") for t in coordinator)):
                break
            assert time.monotonic() < deadline, f"the stack's job did not finish: {tasks}"
            time.sleep(2)
        # Nodes leave right after the coordinator.
        while time.monotonic() < deadline and not all(
                t["CurrentState"].startswith(("Complete", "Failed", "Shutdown"))
                for t in _tasks(c) if not t["Name"].startswith(f"{c.project}_prometheus.")):
            time.sleep(1)
        c.window = (t_start, time.time())
        c.tasks = _tasks(c)
        c.logs = "\n".join(c.docker("service", "logs", "--raw", f"{c.project}_{s}", check=False).stdout
                           + c.docker("service", "logs", "--raw", f"{c.project}_{s}", check=False).stderr
                           for s in ("coordinator", "worker", "ps"))
        yield c
    finally:
        c.docker("stack", "rm", c.project, check=False)
        deadline = time.monotonic() + 120
        label = f"label=com.docker.stack.namespace={c.project}"
        while time.monotonic() < deadline and c.docker("ps", "-aq", "--filter", label, check=False).stdout.strip():
            time.sleep(1)
        for volume in ("runs", "prometheus"):
            c.docker("volume", "rm", f"{c.project}_{volume}", check=False)


def test_stack_job_finishes_with_run_records(stack):
    states = {t["Name"]: (t["CurrentState"], t["Error"]) for t in stack.tasks}
    nodes = {n: s for n, s in states.items() if not n.startswith(f"{stack.project}_prometheus.")}
    assert len(nodes) == 1 + WORKERS + SHARDS, states
    assert all(s.startswith("Complete") for s, _ in nodes.values()), f"{states}\n{stack.logs[-6000:]}"
    summary = json.loads(stack.read_run_file("summary.json"))
    assert summary["status"] == "ok" and summary["workers"] == WORKERS and summary["ps_shards"] == SHARDS
    rows = stack.read_run_file("iterations.csv").strip().splitlines()
    assert len(rows) == 1 + ITERATIONS * WORKERS, f"{len(rows) - 1} iteration rows"


def test_every_task_shaped_its_overlay_link(stack):
    shaped = [line for line in stack.logs.splitlines() if "entrypoint: link: backend" in line]
    assert len(shaped) == 1 + WORKERS + SHARDS, "\n".join(shaped) or stack.logs[-4000:]
    assert all("backend tbf" in line or "backend htb" in line or "backend netem" in line for line in shaped), shaped


def test_prometheus_scraped_every_node(stack):
    start, end = stack.window
    series = stack.query_range("max by (node) (synclab_link_rate_bits_per_second{direction=\"egress\"})", start, end)
    assert {s["metric"]["node"] for s in series} == NODES, series
    tx = stack.query_range('max by (node) (synclab_interface_transmit_bytes_total{node=~"worker.*|ps.*"})',
                           start, end)
    sent = {s["metric"]["node"]: max(float(v[1]) for v in s["values"]) for s in tx}
    assert set(sent) == NODES - {"coordinator"} and all(b > 10e6 for b in sent.values()), sent
