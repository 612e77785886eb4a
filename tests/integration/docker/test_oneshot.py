"""One-shot container jobs: `docker compose up --exit-code-from coordinator` exits with the job's status.

--exit-code-from implies --abort-on-container-exit: compose stops every container as soon as any
one exits. Workers and PS shards therefore wait for the coordinator to stop serving before they
leave, so the coordinator writes summary.json and status.json and its exit code is the job's:

- a job that runs to the end exits 0, with summary.json and status.json (ok) in /runs/latest;
- a spec that does not resolve exits 2, and status.json names the bad key;
- a worker process that dies mid-job fails the job: exit 1, status.json gives the coordinator's reason;
- a worker container that is killed makes compose stop the job: a non-zero exit, status interrupted;
- REPEAT=2 runs two jobs before anything exits; REPEAT=0 (the default) reruns jobs until stopped.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from integration.docker.conftest import kill_script

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

REPO = Path(__file__).resolve().parents[3]
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")

NODES = ("coordinator", "worker", "ps")
SMALL_JOB = {"PROFILE": "1gbit", "WORKERS": "2", "SHARDS": "2", "ITERATIONS": "12", "REPEAT": "1",
             "SPEC_SET": "run.warmup=2"}
LONG_JOB = {**SMALL_JOB, "ITERATIONS": "100000", "SPEC_SET": "run.warmup=2 run.heartbeat_timeout_s=5"}
# The role a worker container runs (the entrypoint's own command line says `--as-user worker`).
KILL_WORKER_ROLE = kill_script("b'worker' in argv and b'--rank' in argv")


@pytest.fixture
def cluster(images, compose_project):
    """A fresh compose project per test (its own runs volume); removed afterwards."""
    made = []

    def make(**settings: str):
        c = compose_project(f"oneshot{len(made)}", **settings)
        made.append(c)
        return c

    yield make
    for c in made:
        c.compose("down", "-v", "--remove-orphans", "--timeout", "5", check=False, timeout=300)


UP_ONE_SHOT = ("up", "--exit-code-from", "coordinator", "--no-color", *NODES)


def run_one_shot(c, timeout: float = 600) -> subprocess.CompletedProcess:
    """`docker compose up --exit-code-from coordinator` of the job's services, to its end."""
    return c.compose(*UP_ONE_SHOT, timeout=timeout, check=False)


def start_one_shot(c) -> subprocess.Popen:
    """The same, left running (its output merged into stdout)."""
    return subprocess.Popen([DOCKER, "compose", *UP_ONE_SHOT], env=c.env, cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def run_statuses(c) -> dict[str, dict | None]:
    """status.json of every run directory on the project's volume (None: none yet), oldest first."""
    script = ("import json, pathlib\n"
              "runs = sorted(d for d in pathlib.Path('/runs').iterdir() if d.is_dir() and not d.is_symlink())\n"
              "print(json.dumps({d.name: json.loads((d / 'status.json').read_text())\n"
              "                  if (d / 'status.json').exists() else None for d in runs}))")
    out = c.docker("run", "--rm", "-v", f"{c.project}_runs:/runs:ro", "--entrypoint", "python",
                   c.env.get("SYNCLAB_IMAGE", "synclab:latest"), "-c", script).stdout
    return json.loads(out)


def wait_for_training(c, deadline_s: float = 300) -> None:
    """Until every node registered and a few iterations ran (the coordinator's log says so)."""
    deadline = time.monotonic() + deadline_s
    while True:
        logs = c.compose("logs", "--no-color", "coordinator", check=False).stdout
        if all(f"registered {n}" in logs for n in ("worker0", "worker1", "ps0", "ps1")):
            break
        assert time.monotonic() < deadline, c.compose("logs", "--no-color", check=False).stdout[-4000:]
        time.sleep(1)
    time.sleep(5)  # let training start


def test_a_finished_job_exits_0_with_its_records(cluster):
    c = cluster(**SMALL_JOB)
    r = run_one_shot(c)
    logs = r.stdout + r.stderr
    assert r.returncode == 0, logs[-6000:]
    status = json.loads(c.read_run_file("status.json"))
    assert status["status"] == "ok" and status["exit_codes"] == {"coordinator": 0}, status
    summary = json.loads(c.read_run_file("summary.json"))
    assert summary["status"] == "ok" and summary["workers"] == 2 and summary["ps_shards"] == 2, summary
    rows = c.read_run_file("iterations.csv").strip().splitlines()
    assert len(rows) == 1 + 12 * 2, f"{len(rows) - 1} iteration rows"
    (coordinator,) = c.containers("coordinator")
    assert coordinator["State"] == "exited" and coordinator["ExitCode"] == 0, coordinator
    # the nodes were done before the coordinator, and waited for it instead of stopping it
    assert "waiting for the coordinator" in logs, logs[-6000:]
    # and the stop compose sends them as the coordinator exits does not turn their ok into 143
    nodes = {x["Name"]: x["ExitCode"] for s in ("worker", "ps") for x in c.containers(s)}
    assert len(nodes) == 4 and set(nodes.values()) == {0}, nodes


def test_a_spec_that_does_not_resolve_exits_2_naming_the_key(cluster):
    c = cluster(**{**SMALL_JOB, "SPEC_SET": "optimizer.lr=fast"})
    t0 = time.monotonic()
    r = run_one_shot(c, timeout=300)
    assert r.returncode == 2, (r.stdout + r.stderr)[-6000:]
    assert time.monotonic() - t0 < 120
    status = json.loads(c.read_run_file("status.json"))
    assert status["status"] == "failed" and "optimizer.lr" in status["reason"], status
    assert status["exit_codes"] == {"coordinator": 2}


def test_a_worker_process_that_dies_fails_the_job_with_its_reason(cluster):
    c = cluster(**LONG_JOB)
    up = start_one_shot(c)
    try:
        wait_for_training(c)
        victim = c.containers("worker")[0]["Name"]
        killed = c.docker("exec", victim, "python", "-c", KILL_WORKER_ROLE)
        assert "killed" in killed.stdout, killed.stdout + killed.stderr
        killed_at = time.monotonic()
        out, _ = up.communicate(timeout=180)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 1, out[-6000:]
    assert time.monotonic() - killed_at < 90
    status = json.loads(c.read_run_file("status.json"))
    assert status["status"] == "failed" and status["exit_codes"] == {"coordinator": 1}, status
    assert "worker" in status["reason"], status
    print(f"\nstatus.json of the failed job: {json.dumps(status)}")


def test_a_killed_worker_container_stops_the_job_non_zero(cluster):
    c = cluster(**LONG_JOB)
    up = start_one_shot(c)
    try:
        wait_for_training(c)
        c.docker("kill", c.containers("worker")[0]["Name"])
        out, _ = up.communicate(timeout=180)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode != 0, out[-6000:]
    status = json.loads(c.read_run_file("status.json"))
    assert status["status"] in ("interrupted", "failed") and status["reason"], status
    assert status["exit_codes"]["coordinator"] == up.returncode, (status, up.returncode)
    print(f"\ncompose exit code {up.returncode}; status.json: {json.dumps(status)}")


def test_repeat_2_runs_two_jobs_before_exiting_0(cluster):
    c = cluster(**{**SMALL_JOB, "ITERATIONS": "6", "REPEAT": "2"})
    r = run_one_shot(c)
    assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
    statuses = list(run_statuses(c).values())
    assert [s["status"] for s in statuses] == ["ok", "ok"], statuses


def test_repeat_0_reruns_jobs_until_stopped(cluster):
    c = cluster(**{**SMALL_JOB, "ITERATIONS": "6", "REPEAT": "0"})
    c.compose("up", "-d", *NODES, timeout=300)
    deadline = time.monotonic() + 480
    while sum(s is not None and s["status"] == "ok" for s in run_statuses(c).values()) < 2:
        assert time.monotonic() < deadline, c.compose("logs", "--no-color", check=False).stdout[-6000:]
        time.sleep(5)
    nodes = [x for s in NODES for x in c.containers(s)]
    assert all(x["State"] == "running" for x in nodes), nodes  # nobody left after a job
    c.compose("stop", "--timeout", "10", timeout=120)
    stopped = [x for s in NODES for x in c.containers(s)]
    assert all(x["State"] == "exited" and x["ExitCode"] == 0 for x in stopped), stopped
