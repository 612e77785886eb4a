"""A container job over mutual TLS (docker-compose.tls.yml) whose servers listen on the cluster interface only."""

from __future__ import annotations

import json

import pytest

from integration.docker.test_oneshot import NODES, SMALL_JOB, cluster  # noqa: F401 - the fixture
from synclab.wire.tls import make_cluster_ca

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]


def test_one_shot_job_over_tls(cluster, tmp_path):  # noqa: F811
    tls = make_cluster_ca(tmp_path / "tls")
    c = cluster(**SMALL_JOB, SYNCLAB_TLS_HOST_DIR=str(tls))
    files = ("-f", "docker-compose.yml", "-f", "docker-compose.tls.yml")
    r = c.compose(*files, "up", "--exit-code-from", "coordinator", "--no-color", *NODES, timeout=600, check=False)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    summary = json.loads(c.read_run_file("summary.json"))
    assert summary["transport_security"] == "mutual TLS (cluster CA) + job token"
    logs = c.compose(*files, "logs", "--no-color", "worker", check=False).stdout
    assert "0.0.0.0" not in logs  # nodes bind and advertise their cluster address
