"""Shared pieces of the container tests: Docker set up (or a clear skip), images built once,
and a compose project per test module with its own name, environment and Prometheus port."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from synclab.cli.compose_env import write_compose_env

REPO = Path(__file__).resolve().parents[3]
# Compose reads .env, which holds generated secrets and is never tracked: make it as a user would.
write_compose_env(REPO / ".env", REPO / ".env.example")
DOCKER_SCRIPTS = REPO / "scripts" / "docker"
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")
BASE_ENV = {"BASE_IMAGE": "local/bookworm:base", "STRATEGY": "ps", "MODEL": "smallcnn", "REPEAT": "1"}


def _unavailable(reason: str):
    if os.environ.get("SYNCLAB_REQUIRE_DOCKER") == "1":
        pytest.fail(f"Docker is required (SYNCLAB_REQUIRE_DOCKER=1) but {reason}")
    pytest.skip(reason)


def kill_script(condition: str) -> str:
    """Python source, run inside a container, that SIGKILLs every process whose ``argv`` (a list of bytes)
    meets ``condition`` and prints `killed PID ARGV` for each. A process that exits while the loop reads
    /proc (a child of the one just killed, a `docker exec` of its own) is skipped, not an error."""
    return ("import os, signal\n"
            "for p in filter(str.isdigit, os.listdir('/proc')):\n"
            "    try:\n"
            "        argv = open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')\n"
            "    except OSError:\n"
            "        continue\n"
            f"    if {condition}:\n"
            "        try:\n"
            "            os.kill(int(p), signal.SIGKILL)\n"
            "        except ProcessLookupError:\n"
            "            continue\n"
            "        print('killed', p, argv)\n")


def sh(*cmd: str, env: dict | None = None, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"`{' '.join(cmd)}` exited {proc.returncode}:\n{proc.stdout[-4000:]}\n"
                             f"{proc.stderr[-4000:]}")
    return proc


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def docker_engine():
    """A running engine and the compose plugin: set up here when root, else whatever exists."""
    if os.geteuid() == 0:
        r = sh(str(DOCKER_SCRIPTS / "setup.sh"), check=False, timeout=900)
        if r.returncode != 0:
            _unavailable(f"scripts/docker/setup.sh could not provide Docker:\n{r.stderr[-2000:]}")
    for probe in ((DOCKER, "info"), (DOCKER, "compose", "version")):
        r = sh(*probe, check=False, timeout=60)
        if r.returncode != 0:
            _unavailable(f"`{' '.join(probe)}` fails (not root, and no usable engine): {r.stderr.strip()[:500]}")


class Cluster:
    """One compose project of this test: its environment, commands, and Prometheus."""

    def __init__(self, name: str, **settings: str):
        self.project, self.prometheus_port = f"synclabtest{name}{os.getpid()}", free_port()
        self.env = {**os.environ, **BASE_ENV, "COMPOSE_PROJECT_NAME": self.project,
                    "PROMETHEUS_PORT": str(self.prometheus_port), **settings}

    def compose(self, *args: str, timeout: float = 600, check: bool = True) -> subprocess.CompletedProcess:
        return sh(DOCKER, "compose", *args, env=self.env, timeout=timeout, check=check)

    def docker(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        return sh(DOCKER, *args, env=self.env, timeout=timeout, check=check)

    def containers(self, service: str | None = None) -> list[dict]:
        out = self.compose("ps", "-a", "--format", "json", *([service] if service else [])).stdout
        # compose prints one JSON object per line
        return [json.loads(line) for line in out.splitlines() if line.strip()]

    def read_run_file(self, name: str) -> str:
        return sh(DOCKER, "run", "--rm", "-v", f"{self.project}_runs:/runs:ro", "--entrypoint", "cat",
                  self.env.get("SYNCLAB_IMAGE", "synclab:latest"), f"/runs/latest/{name}").stdout

    def prometheus(self, path: str, **params) -> dict:
        url = f"http://127.0.0.1:{self.prometheus_port}{path}?{urllib.parse.urlencode(params)}"
        with urllib.request.urlopen(url, timeout=30) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]

    def query_range(self, expr: str, start: float, end: float, step: str = "1s") -> list[dict]:
        return self.prometheus("/api/v1/query_range", query=expr, start=start, end=end, step=step)["result"]

    def project_leftovers(self) -> dict[str, list[str]]:
        label = f"label=com.docker.compose.project={self.project}"
        return {kind: sh(DOCKER, *cmd, "--filter", label, "--format", "{{.Name}}" if kind != "containers"
                         else "{{.Names}}").stdout.split()
                for kind, cmd in (("containers", ("ps", "-a")), ("volumes", ("volume", "ls")),
                                  ("networks", ("network", "ls")))}




@pytest.fixture(scope="session")
def docker_unavailable():
    """Skip a test whose engine cannot do what it needs, naming why; fail instead under SYNCLAB_REQUIRE_DOCKER=1."""
    return _unavailable


@pytest.fixture(scope="session")
def images(docker_engine):
    """The SyncLab and Prometheus images on the local debootstrap base, torch from the wheel on disk;
    returns the seconds the build took."""
    t0 = time.monotonic()
    sh(str(DOCKER_SCRIPTS / "build.sh"), "coordinator", "prometheus",
       env={**os.environ, **BASE_ENV}, timeout=1500)
    return round(time.monotonic() - t0, 1)


@pytest.fixture(scope="session")
def compose_project():
    """Make a :class:`Cluster`: ``compose_project(name, VAR=value, ...)`` (variables as in .env)."""
    return Cluster
