"""The container entrypoint (services/entrypoint.py) without a container: its variables, its
job spec (the same as ``synclab run`` makes from the same file and overrides), help and health."""

from __future__ import annotations

import importlib.util
import json
import os
import socket
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from synclab.config.settings import ContainerSettings

ROOT = Path(__file__).resolve().parents[3]
COMPOSE_SPEC = ROOT / "services" / "specs" / "compose.yaml"


@pytest.fixture
def entrypoint(tmp_path, monkeypatch):
    """A fresh copy of the entrypoint module whose state files live under tmp_path."""
    loader = importlib.util.spec_from_file_location("synclab_container_entrypoint", ROOT / "services" / "entrypoint.py")
    module = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(module)
    state = tmp_path / "state"
    for name in ("SHAPING_FILE", "JOB_SPEC_FILE", "JOB_STARTED_FILE", "HEALTH_FILE"):
        monkeypatch.setattr(module, name, state / getattr(module, name).name)
    monkeypatch.setattr(module, "STATE_DIR", state)
    for var in [v for v in os.environ if v.startswith("SYNCLAB_")]:
        monkeypatch.delenv(var)
    return module


def test_cli_and_container_resolve_the_same_spec(entrypoint, tmp_path, monkeypatch):
    import synclab.netem.netns
    import synclab.roles.launcher
    from synclab.cli import app

    env = {"SYNCLAB_TOKEN": "t", "SYNCLAB_SPEC": str(COMPOSE_SPEC), "SYNCLAB_STRATEGY": "ps", "SYNCLAB_WORKERS": "3",
           "SYNCLAB_ITERATIONS": "7", "SYNCLAB_SET": "optimizer.lr=0.1 model.batch_size=16 run.warmup=1"}
    # a container without NET_ADMIN: the 1gbit profile is left to the transport (app backend)
    entrypoint.resolve_job_spec(ContainerSettings.from_env(env),
                                {"profile": "1gbit", "backend": "app", "kernel": []})
    container = yaml.safe_load(entrypoint.JOB_SPEC_FILE.read_text())

    class NoCluster:  # `synclab run` writes spec.yaml, then would start processes
        def __init__(self, *args, **kwargs):
            raise RuntimeError("no cluster in a unit test")

    monkeypatch.setattr(synclab.roles.launcher, "LocalCluster", NoCluster)
    monkeypatch.setattr(synclab.netem.netns, "netns_unavailable_reason", lambda: "not in a unit test")
    sets = ["strategy.name=ps", "cluster.workers=3", "run.iterations=7", "optimizer.lr=0.1", "model.batch_size=16",
            "run.warmup=1", "network.profile=1gbit", "network.isolation=none"]
    out = tmp_path / "run"
    args = ["run", str(COMPOSE_SPEC), "--out", str(out), *[a for s in sets for a in ("--set", s)]]
    result = CliRunner().invoke(app, args)
    assert isinstance(result.exception, RuntimeError), result.output
    cli = yaml.safe_load((out / "spec.yaml").read_text())

    assert container == cli
    assert cli["cluster"]["workers"] == 3 and cli["optimizer"]["lr"] == 0.1 and cli["network"]["backend"] == "app"


def test_a_bad_spec_key_stops_the_coordinator_naming_file_and_key(entrypoint, monkeypatch, capsys):
    monkeypatch.setenv("SYNCLAB_TOKEN", "t")
    monkeypatch.setenv("SYNCLAB_SPEC", str(COMPOSE_SPEC))
    monkeypatch.setenv("SYNCLAB_SET", "cluster.workers=0")
    assert entrypoint.main(["coordinator"]) == 2
    err = capsys.readouterr().err
    assert f"entrypoint: error: {COMPOSE_SPEC}: cluster.workers" in err
    assert not entrypoint.JOB_SPEC_FILE.exists()


@pytest.mark.parametrize("env, message", [
    ({}, "SYNCLAB_TOKEN is required"),
    ({"SYNCLAB_TOKEN": "t", "SYNCLAB_METRICS_PORT": "abc"}, "SYNCLAB_METRICS_PORT='abc' is not an integer"),
    ({"SYNCLAB_TOKEN": "t", "SYNCLAB_METRICS_PORT": "70000"}, "SYNCLAB_METRICS_PORT=70000 is out of range"),
])
def test_a_bad_variable_stops_before_shaping(entrypoint, monkeypatch, capsys, env, message):
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    assert entrypoint.main(["worker"]) == 2
    assert f"entrypoint: error: {message}" in capsys.readouterr().err
    assert not entrypoint.SHAPING_FILE.exists()


def test_help_lists_every_variable(entrypoint, capsys):
    assert entrypoint.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert "entrypoint.py healthcheck" in out
    for field in ContainerSettings.model_fields.values():
        assert field.validation_alias in out


def test_healthcheck_uses_the_validated_port_and_grace(entrypoint, capsys):
    assert entrypoint.healthcheck() == 1  # no role started here
    with socket.socket() as s:  # a port nothing answers on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    entrypoint.STATE_DIR.mkdir(parents=True)
    entrypoint.JOB_STARTED_FILE.touch()
    entrypoint.HEALTH_FILE.write_text(json.dumps({"metrics_port": port, "grace_s": 120.0}))
    assert entrypoint.healthcheck() == 0  # a job started within the grace
    entrypoint.HEALTH_FILE.write_text(json.dumps({"metrics_port": port, "grace_s": 0.0}))
    assert entrypoint.healthcheck() == 1
    assert f"port {port} does not answer" in capsys.readouterr().err
