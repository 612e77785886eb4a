"""A whole job over mutual TLS: the launcher makes the job's CA and every node speaks TLS."""

import json

import pytest

from support.cluster import FAST, run_spec

pytestmark = pytest.mark.slow


def test_job_runs_over_mutual_tls(tmp_path):
    r = run_spec(tmp_path, *FAST, "transport.tls=true")
    assert r.returncode == 0, r.stderr
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["transport_security"] == "mutual TLS (cluster CA) + job token"
    assert {p.name for p in (tmp_path / "tls").iterdir()} == {"ca.pem", "node.pem", "node-key.pem"}
    assert json.loads((tmp_path / "control.json").read_text())["tls_dir"] == str((tmp_path / "tls").resolve())


def test_job_without_tls_says_so(tmp_path):
    r = run_spec(tmp_path, *FAST)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "summary.json").read_text())["transport_security"] == "job token"
    assert not (tmp_path / "tls").exists()
