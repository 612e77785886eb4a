"""The GPU override as Compose resolves it: no GPU host is needed to check what it asks for.

Building or running the CUDA image needs a CUDA torch wheel (gigabytes, not fetched in CI) and an
NVIDIA host; what can be checked here is that `docker compose -f docker-compose.yml -f
docker-compose.gpu.yml config` merges into workers that reserve NVIDIA GPUs, use their own image
built with a CUDA wheel index, and a job spec that computes on cuda, while the other roles stay on
the CPU image.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.docker

REPO = Path(__file__).resolve().parents[3]
DOCKER = "/usr/bin/docker" if Path("/usr/bin/docker").exists() else (shutil.which("docker") or "docker")


def _config(**env: str) -> dict:
    full = {**os.environ, "BASE_IMAGE": "local/bookworm:base", "COMPOSE_PROJECT_NAME": "synclabgpucheck", **env}
    r = subprocess.run([DOCKER, "compose", "-f", "docker-compose.yml", "-f", "docker-compose.gpu.yml", "config",
                        "--format", "json"], cwd=REPO, env=full, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_gpu_override_reserves_gpus_for_workers_only(docker_engine):
    services = _config(WORKERS="3")["services"]
    worker = services["worker"]
    devices = worker["deploy"]["resources"]["reservations"]["devices"]
    assert devices == [{"driver": "nvidia", "count": -1, "capabilities": ["gpu"]}] or \
        devices == [{"driver": "nvidia", "count": "all", "capabilities": ["gpu"]}], devices
    assert worker["deploy"]["replicas"] == 3
    assert worker["image"] == "synclab:gpu"
    args = worker["build"]["args"]
    assert args["TORCH_INDEX_URL"].startswith("https://download.pytorch.org/whl/cu")
    assert args["LOCAL_TORCH_WHEEL"] == "no"  # never the CPU wheel CI keeps in services/wheels/
    assert "compute,utility" in worker["environment"]["NVIDIA_DRIVER_CAPABILITIES"]
    assert "compute.device=cuda" in services["coordinator"]["environment"]["SYNCLAB_SET"]
    for role in ("coordinator", "ps"):
        assert "devices" not in json.dumps(services[role].get("deploy", {})), role
        assert services[role]["image"] != "synclab:gpu", role


def test_gpu_count_and_image_follow_the_environment(docker_engine):
    worker = _config(GPU_COUNT="1", SYNCLAB_GPU_IMAGE="me/synclab:cuda")["services"]["worker"]
    assert worker["deploy"]["resources"]["reservations"]["devices"][0]["count"] == 1
    assert worker["image"] == "me/synclab:cuda"
