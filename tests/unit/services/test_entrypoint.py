"""The container entrypoint (services/entrypoint.py, logic in synclab.roles.container) without a container:
its variables, its job spec (the same as ``synclab run`` makes from the same file and overrides), help and
health, its supervisor and the restart policy it shares with the local launcher."""

from __future__ import annotations

import json
import os
import socket

import pytest
import yaml
from typer.testing import CliRunner

# entrypoint_fixture is the `entrypoint` fixture: imported, pytest finds it here
from support.entrypoint import COMPOSE_SPEC, SHIM, entrypoint_fixture, restart_run_dir  # noqa: F401
from support.scripts import load_script
from synclab.config.settings import ContainerSettings


def test_the_script_is_a_thin_shim_over_the_package():
    assert len(SHIM.read_text().splitlines()) <= 60
    from synclab.roles.container.main import main

    assert load_script(SHIM, "synclab_container_entrypoint").main is main


def test_the_container_and_the_local_launcher_share_one_restart_policy():
    import synclab.roles.container.jobs
    import synclab.roles.launcher
    from synclab.config import parse_spec
    from synclab.roles import restart

    assert synclab.roles.launcher.restart_due is restart.restart_due is synclab.roles.container.jobs.restart_due
    assert synclab.roles.launcher.next_attempt is restart.next_attempt is synclab.roles.container.jobs.next_attempt
    typed = parse_spec({"run": {"restart": "on-failure", "max_restarts": 1, "checkpoint_every": 1}}).run
    assert [restart.restart_due(typed, n) for n in (0, 1)] == [True, False]
    assert restart.restart_due(typed.model_dump(), 0) and not restart.restart_due(typed.model_dump(), 1)


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


def test_a_bad_spec_key_stops_the_coordinator_naming_file_and_key(entrypoint, monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("SYNCLAB_TOKEN", "t")
    monkeypatch.setenv("SYNCLAB_SPEC", str(COMPOSE_SPEC))
    monkeypatch.setenv("SYNCLAB_SET", "cluster.workers=0")
    monkeypatch.setenv("SYNCLAB_RUNS_DIR", str(tmp_path / "runs"))
    assert entrypoint.main(["coordinator"]) == 2
    err = capsys.readouterr().err
    assert f"entrypoint: error: {COMPOSE_SPEC}: cluster.workers" in err
    assert not entrypoint.JOB_SPEC_FILE.exists()
    # runs/latest is this refused job, not an older one that succeeded
    status = json.loads((tmp_path / "runs" / "latest" / "status.json").read_text())
    assert status["status"] == "failed" and "cluster.workers" in status["reason"]
    assert status["exit_codes"] == {"coordinator": 2}


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


def test_exit_code_of_a_signalled_child_is_128_plus_the_signal(entrypoint):
    assert [entrypoint.exit_code(rc) for rc in (0, 1, 2, -15, -9)] == [0, 1, 2, 143, 137]


def test_job_status_ok_failed_and_interrupted(entrypoint, tmp_path):
    assert entrypoint.job_status(0, tmp_path) == {"status": "ok", "reason": "", "exit_codes": {"coordinator": 0}}
    plain = entrypoint.job_status(3, tmp_path)
    assert plain["status"] == "failed" and "coordinator exited with code 3" in plain["reason"]
    stopped = entrypoint.job_status(-15, tmp_path, interrupted_by="SIGTERM")
    assert stopped["status"] == "interrupted" and "stopped by SIGTERM" in stopped["reason"]
    assert stopped["exit_codes"] == {"coordinator": 143}
    # the coordinator's own reason wins, also over a stop that came after it
    (tmp_path / "failure.json").write_text(json.dumps(
        {"status": "failed", "reason": "no heartbeat from worker1 for 5 s", "nodes_done": ["ps0"]}))
    for status in (entrypoint.job_status(1, tmp_path), entrypoint.job_status(-15, tmp_path, "SIGTERM")):
        assert status["status"] == "failed" and status["reason"] == "no heartbeat from worker1 for 5 s"
        assert status["nodes_done"] == ["ps0"]


def test_tls_files_are_copied_private_for_the_unprivileged_stage(entrypoint, tmp_path, monkeypatch):
    from synclab.wire.tls import ENV, TlsError, make_cluster_ca

    src = make_cluster_ca(tmp_path / "mounted")
    monkeypatch.setenv(ENV, str(src))
    target = entrypoint.private_tls_copy(os.getuid(), os.getgid(), state_dir=tmp_path / "state-dir-made")
    assert os.environ[ENV] == str(target)
    assert (target / "node-key.pem").read_bytes() == (src / "node-key.pem").read_bytes()
    assert oct((target / "node-key.pem").stat().st_mode & 0o777) == "0o600"
    monkeypatch.setenv(ENV, str(tmp_path / "empty"))
    with pytest.raises(TlsError, match="missing ca.pem"):
        entrypoint.private_tls_copy(os.getuid(), os.getgid(), state_dir=tmp_path)
    monkeypatch.delenv(ENV)
    assert entrypoint.private_tls_copy(os.getuid(), os.getgid(), state_dir=tmp_path) is None


def test_nodes_serve_on_the_cluster_interface_only(entrypoint, monkeypatch):
    monkeypatch.setattr(entrypoint.host, "advertise_address", lambda device: "10.9.8.7")
    monkeypatch.setenv("SYNCLAB_TOKEN", "t")
    job = entrypoint.node_job("worker", entrypoint.read_settings())()
    assert job.cmd[job.cmd.index("--host") + 1] == "10.9.8.7"
    assert "0.0.0.0" not in job.cmd


# -- run.restart: on-failure: the next attempt in the same run directory --------------------------
def test_a_restart_is_due_only_on_failure_within_max_restarts(entrypoint):
    on_failure = {"restart": "on-failure", "max_restarts": 2}
    assert [entrypoint.restart_due(on_failure, n) for n in (0, 1, 2)] == [True, True, False]
    assert not entrypoint.restart_due({"restart": "no", "max_restarts": 3}, 0)
    assert not entrypoint.restart_due({}, 0)


def test_the_resumed_spec_changes_only_run_resume_from(entrypoint):
    spec = {"name": "x", "run": {"iterations": 40, "checkpoint_every": 5, "resume_from": 0}}
    resumed = entrypoint.resume_spec(spec, 15)
    assert resumed == {"name": "x", "run": {"iterations": 40, "checkpoint_every": 5, "resume_from": 15}}
    assert spec["run"]["resume_from"] == 0


@pytest.mark.parametrize("spec, status, due", [
    (None, None, False),                                              # no job recorded
    ({"run": {"restart": "no"}}, None, False),                        # a job without restarts
    ({"run": {"restart": "on-failure"}}, None, True),                 # its first attempt failed just now
    ({"run": {"restart": "on-failure"}}, {"status": "restarting"}, True),
    ({"run": {"restart": "on-failure"}}, {"status": "ok"}, False),    # final outcomes
    ({"run": {"restart": "on-failure"}}, {"status": "failed"}, False),
    ({"run": {"restart": "on-failure"}}, {"status": "interrupted"}, False),
])
def test_a_node_rejoins_while_the_job_may_restart(entrypoint, spec, status, due):
    assert entrypoint.rejoin_due(spec, status) is due


def test_a_coordinator_started_again_takes_up_only_an_unfinished_restartable_job(entrypoint, tmp_path):
    runs = tmp_path / "runs"
    run_dir = restart_run_dir(runs)  # runs/run: spec with run.restart: on-failure, max_restarts 2
    (runs / "latest").symlink_to("run")
    spec_text = (run_dir / "spec.yaml").read_text()
    assert entrypoint.unfinished_run(runs, spec_text) == (run_dir, [])
    (run_dir / "status.json").write_text(json.dumps({"status": "restarting", "restarts": [{"resumed_from": 5}]}))
    assert entrypoint.unfinished_run(runs, spec_text) == (run_dir, [{"resumed_from": 5}])
    assert entrypoint.unfinished_run(runs, spec_text + "# another job\n") is None
    (run_dir / "status.json").write_text(json.dumps({"status": "restarting", "restarts": [{}, {}]}))
    assert entrypoint.unfinished_run(runs, spec_text) is None  # no restart left
    for final in ("ok", "failed", "interrupted"):
        (run_dir / "status.json").write_text(json.dumps({"status": final}))
        assert entrypoint.unfinished_run(runs, spec_text) is None
    (run_dir / "status.json").unlink()
    (run_dir / "summary.json").write_text("{}")
    assert entrypoint.unfinished_run(runs, spec_text) is None
    assert entrypoint.unfinished_run(tmp_path / "empty", spec_text) is None


def test_coordinator_listens_on_the_cluster_interface_only(entrypoint, monkeypatch, tmp_path):
    monkeypatch.setattr(entrypoint.host, "advertise_address", lambda device: "10.9.8.6")
    monkeypatch.setenv("SYNCLAB_TOKEN", "t")
    cmd = entrypoint.coordinator_cmd(tmp_path / "spec.yaml", tmp_path, entrypoint.read_settings())
    assert cmd[cmd.index("--listen") + 1].startswith("10.9.8.6:")


def test_launch_mode_reads_its_options_and_the_node_command(entrypoint, tmp_path):
    args, cmd = entrypoint.parse_launch(["worker", "worker1", "--spec", str(tmp_path / "spec.yaml"), "--kernel",
                                         "htb,ifb", "--record", str(tmp_path / "shaping-worker1.json"),
                                         "--user", "1000:1000", "--", "synclab", "worker", "--rank", "1"])
    assert (args.role, args.node, args.kernel, args.user) == ("worker", "worker1", "htb,ifb", "1000:1000")
    assert cmd == ["synclab", "worker", "--rank", "1"]
    for bad in (["worker", "w", "--spec", "s", "--record", "r"],            # no `--`
                ["worker", "w", "--spec", "s", "--record", "r", "--"],      # nothing after it
                ["nobody", "w", "--spec", "s", "--record", "r", "--", "x"]):  # not a role
        with pytest.raises(ValueError):
            entrypoint.parse_launch(bad)


def test_launch_mode_refuses_bad_arguments_with_exit_2(entrypoint, capsys):
    assert entrypoint.main(["launch", "worker", "w", "--", "synclab"]) == 2
    assert "entrypoint: error" in capsys.readouterr().err


def test_launch_mode_leaves_a_transport_shaped_job_unshaped(entrypoint):
    from synclab.config import parse_spec

    spec = parse_spec({"network": {"profile": "1gbit", "isolation": "none", "backend": "app",
                                   "app_shaping": ["rate"]}})
    outcome = entrypoint.shape_from_spec(spec, "worker", frozenset())
    assert outcome["backend"] == "app" and outcome["left_to_app"] == ["rate"]
