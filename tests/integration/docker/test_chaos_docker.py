"""Fault cells under `network.isolation: docker`: `synclab chaos` with every node a container.

The ring family's job (wfbp, two workers, checkpoints) in containers on a bridge of its own, through the
real CLI and the image built from this checkout: the highest-ranked worker's container is killed half-way
and the job must restart from its checkpoint and end with the undisturbed (also containerised) run's
parameters, every update once; then every packet of that worker's link (its container's eth0 and the host
veth paired with it) is dropped for 3 s, shorter than the heartbeat timeout, which the job must ride out or
recover from with the same parameters. After each, no container or network of the job may be left.
"""

import json

import pytest

from integration.docker.test_docker_isolation import image  # noqa: F401 - the fixture
from support.cluster import synclab

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

# the chaos matrix's ring family, smallcnn for 60 iterations (still running when the fault lands half-way)
SETTINGS = ["strategy.name=wfbp", "cluster.ps_shards=0", "model.name=smallcnn", "model.batch_size=16",
            "network.rate=null", "run.iterations=60", "run.warmup=1", "network.isolation=docker"]
EMPTY = {"processes": [], "netns": [], "containers": [], "networks": []}


def test_killed_worker_container_and_dropped_link_under_docker_isolation(tmp_path, image):  # noqa: F811
    import os

    args = ["chaos", "quickstart", "--fault", "kill:worker", "--fault", "drop:worker:3", "--out", tmp_path]
    for s in SETTINGS:
        args += ["--set", s]
    r = synclab(*args, timeout=1100, env={**os.environ, "SYNCLAB_IMAGE": image})
    kill = json.loads((tmp_path / "kill-worker" / "cell.json").read_text())
    assert kill["isolation"] == "docker", kill
    assert kill["outcome"] == "recovered", (kill, r.stdout[-3000:], r.stderr[-3000:])
    assert kill["node"] == "worker1" and "worker1" in kill["restarts"][0]["reason"]
    assert kill["restarts"][0]["resumed_from"] >= kill["checkpoint_every"]
    assert kill["left_behind"] == EMPTY
    drop = json.loads((tmp_path / "drop-worker-3" / "cell.json").read_text())
    assert drop["isolation"] == "docker", drop
    assert drop["outcome"] in ("unaffected", "recovered"), drop
    assert drop["node"] == "worker1" and drop["injection"]["dropped_packets"] > 0
    assert drop["left_behind"] == EMPTY
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
