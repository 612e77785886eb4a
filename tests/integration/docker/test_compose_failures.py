"""Bad input and failures in the container cluster: they stop it at once and say why.

- a bad environment value: the container exits 2 naming the variable (in `docker compose logs`);
- no NET_ADMIN: the entrypoint says so and falls back to the `app` backend;
- a PS shard that dies: the job fails (coordinator exit 1, failure.json), nothing hangs.
"""

from __future__ import annotations

import json
import time

import pytest

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


@pytest.fixture(scope="module")
def project(images, compose_project):
    c = compose_project("fail", PROFILE="1gbit", WORKERS="2", SHARDS="2")
    yield c
    c.compose("down", "-v", "--remove-orphans", "--timeout", "5", check=False, timeout=300)


@pytest.mark.parametrize("variable, value, message", [
    ("SYNCLAB_WORKERS", "two", "SYNCLAB_WORKERS='two' is not an integer"),
    ("SYNCLAB_PROFILE", "10mbit-nope", "SYNCLAB_PROFILE='10mbit-nope': unknown profile"),
    ("SYNCLAB_STRATEGY", "nope", "unknown strategy 'nope'"),
    ("SYNCLAB_REPEAT", "-1", "SYNCLAB_REPEAT=-1 is out of range"),
])
def test_bad_environment_value_exits_at_once_naming_it(project, variable, value, message):
    t0 = time.monotonic()
    r = project.compose("run", "--rm", "--no-deps", "-e", f"{variable}={value}", "coordinator", check=False,
                        timeout=120)
    assert r.returncode == 2, r.stdout + r.stderr
    assert message in r.stderr, r.stderr
    assert time.monotonic() - t0 < 60


def test_missing_net_admin_falls_back_to_app_visibly(project):
    # Shaping comes first; an unreachable coordinator then ends the worker quickly.
    r = project.compose("run", "--rm", "--no-deps", "--cap-drop", "NET_ADMIN", "-e", "SYNCLAB_COORDINATOR=nohost:1",
                        "-e", "SYNCLAB_CONNECT_TIMEOUT=2", "worker", check=False, timeout=120)
    assert "NET_ADMIN capability missing" in r.stderr and "link: backend app" in r.stderr, r.stderr
    assert r.returncode != 0


def test_dead_ps_shard_fails_the_job_without_hanging(project):
    project.env.update(ITERATIONS="100000", SPEC_SET="run.heartbeat_timeout_s=5")
    project.compose("up", "-d", "coordinator", "worker", "ps", timeout=300)
    deadline = time.monotonic() + 240
    while "registered ps1" not in project.compose("logs", "coordinator", check=False).stdout \
            or "registered ps0" not in project.compose("logs", "coordinator", check=False).stdout:
        assert time.monotonic() < deadline, project.compose("logs", check=False).stdout[-4000:]
        time.sleep(1)
    time.sleep(3)  # let training start
    victim = project.containers("ps")[0]["Name"]
    killed_at = time.monotonic()
    project.docker("kill", victim)
    project.compose("wait", "coordinator", timeout=180, check=False)
    elapsed = time.monotonic() - killed_at
    logs = project.compose("logs", "--no-color", check=False).stdout
    (coordinator,) = project.containers("coordinator")
    assert coordinator["State"] == "exited" and coordinator["ExitCode"] == 1, logs[-4000:]
    assert elapsed < 60, f"the job took {elapsed:.0f} s to notice a dead PS shard"
    failure = json.loads(project.read_run_file("failure.json"))
    assert failure["status"] == "failed" and "ps" in failure["reason"], failure
    deadline = time.monotonic() + 60
    while any(x["State"] == "running" for x in project.containers("worker")):
        assert time.monotonic() < deadline, "workers still running a minute after the job failed"
        time.sleep(1)
