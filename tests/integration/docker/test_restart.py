"""A container job with `run.restart: on-failure` survives a crashed node (issue 15 item 4).

ps on smallcnn, 2 workers, 2 shards, 40 iterations, a checkpoint every 5, compared with one
uninterrupted run of the same job. Once a checkpoint is committed:

- the role process inside a worker container, or inside the coordinator's, is killed (kill -9; the
  container stays up) under `REPEAT=1 docker compose up --exit-code-from coordinator`: the
  coordinator's entrypoint starts the next attempt in the same run directory from
  `checkpoint/LATEST`, every node whose role failed runs it again and joins, and compose exits 0;
- the coordinator's container is killed and started again (what a Swarm task that replaces it
  does): its entrypoint takes up the unfinished job instead of starting a new one.

Each ends `ok` with the restart in status.json, every (rank, iteration) in iterations.csv once,
and params.pt equal to the uninterrupted run's (rtol 1e-5).
"""

from __future__ import annotations

import csv
import io
import json
import time

import pytest

from integration.docker.conftest import kill_script
from integration.docker.test_oneshot import cluster, run_one_shot, start_one_shot  # noqa: F401 - the fixture

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

ITERATIONS, EVERY = 40, 5
JOB = {"PROFILE": "1gbit", "WORKERS": "2", "SHARDS": "2", "ITERATIONS": str(ITERATIONS), "REPEAT": "1",
       "SPEC_SET": f"run.warmup=2 run.heartbeat_timeout_s=5 run.checkpoint_every={EVERY} run.restart=on-failure"}
# params.pt (rank 0's state dict) of two projects' run volumes, mounted at /a and /b, compared in the image.
COMPARE = ("import json, torch\n"
           "a = torch.load('/a/latest/params.pt', weights_only=False)\n"
           "b = torch.load('/b/latest/params.pt', weights_only=False)\n"
           "same = sorted(a) == sorted(b) and all(a[k].shape == b[k].shape for k in a)\n"
           "print(json.dumps({'tensors': len(a), 'same_layout': same,\n"
           "                  'max_abs_diff': max(float((a[k] - b[k]).abs().max()) for k in a) if same else None,\n"
           "                  'allclose': same and all(torch.allclose(a[k], b[k], rtol=1e-5, atol=0) for k in a)}))\n")


@pytest.fixture(scope="module")
def reference(images, compose_project):
    """The same job, uninterrupted: its params.pt is what a resumed job must end with."""
    c = compose_project("restartref", **JOB)
    try:
        r = run_one_shot(c)
        assert r.returncode == 0, (r.stdout + r.stderr)[-6000:]
        assert json.loads(c.read_run_file("status.json"))["status"] == "ok"
        nodes = [x for s in ("coordinator", "worker", "ps") for x in c.containers(s)]
        assert all(x["ExitCode"] == 0 for x in nodes), [(x["Name"], x["ExitCode"]) for x in nodes]
        yield c
    finally:
        c.compose("down", "-v", "--remove-orphans", "--timeout", "5", check=False, timeout=300)


def committed_checkpoint(c) -> int:
    r = c.compose("exec", "-T", "coordinator", "cat", "/runs/latest/checkpoint/LATEST", check=False, timeout=60)
    return int(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip().isdigit() else 0


def wait_for_checkpoint(c, running) -> int:
    """Until the job has committed a checkpoint (and is not nearly over); returns its iteration."""
    deadline = time.monotonic() + 300
    while (at := committed_checkpoint(c)) < EVERY:
        assert running() and time.monotonic() < deadline, c.compose("logs", "--no-color", check=False).stdout[-6000:]
        time.sleep(0.5)
    assert at < ITERATIONS - EVERY, f"checkpoint {at}: the job is nearly over, nothing left to resume"
    return at


def kill_role(c, service: str) -> None:
    """kill -9 of the role process in the service's first container (the container stays up)."""
    # the role runs `synclab ROLE ...`; the entrypoint's own command line says `--as-user ROLE`
    victim = c.containers(service)[0]["Name"]
    role = f"b'{service}' in argv and b'--as-user' not in argv and b'/opt/synclab/entrypoint.py' not in argv"
    killed = c.docker("exec", victim, "python", "-c", kill_script(role))
    assert "killed" in killed.stdout, killed.stdout + killed.stderr


def assert_resumed(c, reference, at: int, what: str) -> dict:
    """The job ended ok after a restart from a checkpoint at or after ``at``, with every (rank, iteration)
    once and the parameters of the uninterrupted reference run; returns status.json."""
    status = json.loads(c.read_run_file("status.json"))
    assert status["status"] == "ok" and status["exit_codes"] == {"coordinator": 0}, status
    restarts = status.get("restarts", [])
    assert len(restarts) >= 1, status
    assert all(x["resumed_from"] >= at and x["resumed_from"] % EVERY == 0 for x in restarts), status
    assert what in restarts[0]["reason"], status
    rows = csv.DictReader(io.StringIO(c.read_run_file("iterations.csv")))
    pairs = [(int(r["rank"]), int(r["iteration"])) for r in rows]
    expected = {(rank, it) for rank in (0, 1) for it in range(1, ITERATIONS + 1)}
    assert len(pairs) == len(expected) and set(pairs) == expected, sorted(expected - set(pairs))
    image = c.env.get("SYNCLAB_IMAGE", "synclab:latest")
    compared = json.loads(c.docker("run", "--rm", "-v", f"{reference.project}_runs:/a:ro", "-v",
                                   f"{c.project}_runs:/b:ro", "--entrypoint", "python", image, "-c",
                                   COMPARE).stdout)
    print(f"\nstatus.json: {json.dumps(status)}\nparams vs uninterrupted run: {json.dumps(compared)}")
    assert compared["allclose"], compared
    return status


@pytest.mark.parametrize("service, what", [("worker", "worker"), ("coordinator", "coordinator exited")])
def test_a_killed_role_resumes_the_job_from_its_last_checkpoint(cluster, reference, service, what):
    """Under --exit-code-from: the killed role's container stays up, the job goes on, compose exits 0."""
    c = cluster(**JOB)
    up = start_one_shot(c)
    try:
        at = wait_for_checkpoint(c, lambda: up.poll() is None)
        kill_role(c, service)
        out, _ = up.communicate(timeout=600)
    finally:
        if up.poll() is None:
            up.kill()
            up.communicate()
    assert up.returncode == 0, out[-8000:]
    assert "joining it again" in out, out[-6000:]
    assert_resumed(c, reference, at, what)
    nodes = [x for s in ("coordinator", "worker", "ps") for x in c.containers(s)]
    assert all(x["ExitCode"] == 0 for x in nodes), [(x["Name"], x["ExitCode"]) for x in nodes]


def test_a_coordinator_container_started_again_takes_up_the_unfinished_job(cluster, reference):
    """What a Swarm task that replaces a dead coordinator (or `docker compose start`) does."""
    c = cluster(**JOB)
    c.compose("up", "-d", "coordinator", "worker", "ps", timeout=300)
    (coordinator,) = c.containers("coordinator")
    at = wait_for_checkpoint(c, lambda: c.containers("coordinator")[0]["State"] == "running")
    c.docker("kill", coordinator["Name"])
    c.docker("start", coordinator["Name"])
    deadline = time.monotonic() + 400
    while (state := c.containers("coordinator")[0])["State"] != "exited":
        assert time.monotonic() < deadline, c.compose("logs", "--no-color", check=False).stdout[-8000:]
        time.sleep(2)
    logs = c.compose("logs", "--no-color", check=False).stdout
    assert state["ExitCode"] == 0, logs[-8000:]
    assert "joining it again" in logs, logs[-6000:]
    assert_resumed(c, reference, at, "container started again")
