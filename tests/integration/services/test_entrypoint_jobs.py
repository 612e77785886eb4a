"""The container entrypoint (synclab.roles.container) supervising real job processes: exit codes, stops,
lingering, restarts and rejoins (each job a short Python child), and waiting on a coordinator's socket."""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest
import yaml

# entrypoint_fixture is the `entrypoint` fixture: imported, pytest finds it here
from support.entrypoint import entrypoint_fixture, restart_run_dir  # noqa: F401
from synclab.config.settings import ContainerSettings


@pytest.fixture
def own_signals():
    """supervise() installs SIGTERM/SIGINT handlers in this process: put pytest's back afterwards."""
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT)}
    yield
    for sig, handler in saved.items():
        signal.signal(sig, handler)


def python_job(entrypoint, code: str, run_dir: Path | None = None):
    """A next_job() that runs ``code`` in a fresh interpreter; counts how often it was asked for."""
    calls = []

    def next_job():
        calls.append(1)
        return entrypoint.Job([sys.executable, "-c", code], run_dir)

    next_job.calls = calls
    return next_job


def test_one_shot_coordinator_exits_with_its_job_and_writes_status(entrypoint, tmp_path, own_signals):
    entrypoint.STATE_DIR.mkdir(parents=True)
    ok = python_job(entrypoint, f"open({str(tmp_path / 'summary.json')!r}, 'w').write('{{}}')", tmp_path)
    assert entrypoint.supervise(ok, [], dict(os.environ), 1, "coordinator") == 0
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "ok"

    failing = python_job(entrypoint, "raise SystemExit(3)", tmp_path)
    assert entrypoint.supervise(failing, [], dict(os.environ), 1, "coordinator") == 3
    assert len(failing.calls) == 1  # one-shot: a failed job is not rerun
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "failed" and status["exit_codes"] == {"coordinator": 3}


def test_a_stop_interrupts_a_running_job(entrypoint, tmp_path, own_signals):
    entrypoint.STATE_DIR.mkdir(parents=True)
    # the job asks its supervisor to stop (as `docker compose stop` would), then runs on until told
    job = python_job(entrypoint, "import os, signal, time; os.kill(os.getppid(), signal.SIGTERM); time.sleep(60)",
                     tmp_path)
    assert entrypoint.supervise(job, [], dict(os.environ), 1, "coordinator") == 143
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "interrupted" and "stopped by SIGTERM" in status["reason"]


def test_a_stop_after_the_records_are_written_leaves_the_outcome_alone(entrypoint, tmp_path, own_signals):
    """Under --exit-code-from, a node that leaves right after the coordinator's records are written
    makes compose stop the coordinator while it closes down: its exit code still decides."""
    entrypoint.STATE_DIR.mkdir(parents=True)
    job = python_job(entrypoint, f"import os, signal, time; open({str(tmp_path / 'summary.json')!r}, 'w'); "
                                 f"os.kill(os.getppid(), signal.SIGTERM); time.sleep(0.5)", tmp_path)
    assert entrypoint.supervise(job, [], dict(os.environ), 1, "coordinator") == 0
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "ok"


def test_nodes_linger_after_their_last_job_only(entrypoint, own_signals):
    entrypoint.STATE_DIR.mkdir(parents=True)
    lingered = []
    job = python_job(entrypoint, "raise SystemExit(1)")
    assert entrypoint.supervise(job, [], dict(os.environ), 1, "worker", linger=lingered.append) == 1
    assert len(lingered) == 1 and len(job.calls) == 1


def test_waiting_for_the_coordinator_ends_when_it_stops_serving(entrypoint):
    server = socket.create_server(("127.0.0.1", 0))
    address = f"127.0.0.1:{server.getsockname()[1]}"
    assert entrypoint.coordinator_serving(address)
    stopping = threading.Event()
    waiter = threading.Thread(target=entrypoint.wait_for_job_end, args=(address, stopping, 0.02))
    waiter.start()
    server.close()
    waiter.join(timeout=10)
    assert not waiter.is_alive()
    assert not entrypoint.coordinator_serving(address)
    assert not entrypoint.coordinator_serving("no-such-host.invalid:50051", timeout_s=1)


def test_the_coordinator_restarts_in_the_same_run_directory_from_latest(entrypoint, tmp_path):
    run_dir = restart_run_dir(tmp_path)
    restart = entrypoint.coordinator_restart(ContainerSettings.from_env({"SYNCLAB_TOKEN": "t"}))
    failed = entrypoint.Job(["synclab", "coordinator"], run_dir)
    job, resumed_from = restart(failed, 0)
    assert resumed_from == 10 and job.run_dir == run_dir
    spec_path = Path(job.cmd[job.cmd.index("--spec") + 1])
    assert spec_path == run_dir / "spec-restart.yaml"
    assert yaml.safe_load(spec_path.read_text())["run"]["resume_from"] == 10
    assert job.cmd[job.cmd.index("--run-dir") + 1] == str(run_dir)
    assert not (run_dir / "failure.json").exists()  # the next attempt must not look ended
    assert job.start_after_s == 0  # the coordinator failed the attempt: its nodes were told to stop
    crashed, _ = restart(failed, 1)  # no failure.json: the coordinator died, its nodes find out by heartbeats
    assert crashed.start_after_s == entrypoint.nodes_lost_coordinator_s({"heartbeat_s": 1.0}) == 7.0
    assert restart(failed, 2) is None  # max_restarts: 2


def test_no_restart_without_on_failure_and_from_the_start_without_a_checkpoint(entrypoint, tmp_path):
    settings = ContainerSettings.from_env({"SYNCLAB_TOKEN": "t"})
    assert entrypoint.coordinator_restart(settings)(
        entrypoint.Job([], restart_run_dir(tmp_path, restart="no")), 0) is None
    run_dir = restart_run_dir(tmp_path / "early", latest=None)
    _, resumed_from = entrypoint.coordinator_restart(settings)(entrypoint.Job([], run_dir), 0)
    assert resumed_from == 0


def test_a_restarted_one_shot_job_ends_ok_and_status_lists_the_restart(entrypoint, tmp_path, own_signals):
    """The first attempt fails; the second one sees status.json say `restarting` and succeeds."""
    entrypoint.STATE_DIR.mkdir(parents=True)
    seen = tmp_path / "seen.json"
    first = python_job(entrypoint, "raise SystemExit(1)", tmp_path)
    second = entrypoint.Job([sys.executable, "-c", f"import shutil; shutil.copy({str(tmp_path / 'status.json')!r}, "
                                                   f"{str(seen)!r}); open({str(tmp_path / 'summary.json')!r}, 'w')"],
                            tmp_path)
    asked = []

    def restart(job, restarts_so_far):
        asked.append(restarts_so_far)
        return (second, 5) if restarts_so_far == 0 else None

    assert entrypoint.supervise(first, [], dict(os.environ), 1, "coordinator", restart=restart) == 0
    assert asked == [0] and len(first.calls) == 1  # an attempt is not a new job
    between = json.loads(seen.read_text())
    assert between["status"] == "restarting" and between["restarts"][0]["resumed_from"] == 5
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "ok" and status["exit_codes"] == {"coordinator": 0}
    assert [(r["exit_code"], r["resumed_from"]) for r in status["restarts"]] == [(1, 5)]


def test_restarts_end_with_the_last_failure_when_none_is_left(entrypoint, tmp_path, own_signals):
    entrypoint.STATE_DIR.mkdir(parents=True)
    failing = python_job(entrypoint, "raise SystemExit(1)", tmp_path)

    def restart(job, restarts_so_far):
        return (job, 0) if restarts_so_far < 2 else None

    assert entrypoint.supervise(failing, [], dict(os.environ), 1, "coordinator", restart=restart) == 1
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["status"] == "failed" and len(status["restarts"]) == 2


def test_a_node_whose_role_failed_joins_the_next_attempt(entrypoint, tmp_path, own_signals):
    entrypoint.STATE_DIR.mkdir(parents=True)
    marker = tmp_path / "ran-once"
    # fails the first time (a killed role), succeeds the second (the resumed attempt)
    job = python_job(entrypoint, f"import os, sys; p = {str(marker)!r}\n"
                                 f"if not os.path.exists(p): open(p, 'w'); sys.exit(137)")
    lingered, rejoins = [], []

    def rejoin(stopping):
        rejoins.append(1)
        return True

    assert entrypoint.supervise(job, [], dict(os.environ), 1, "worker", linger=lingered.append, rejoin=rejoin) == 0
    assert len(job.calls) == 2 and len(rejoins) == 1 and len(lingered) == 1


def test_node_rejoin_reads_runs_latest_and_asks_the_coordinator(entrypoint, tmp_path):
    server = socket.create_server(("127.0.0.1", 0))
    runs = tmp_path / "runs"
    run_dir = runs / "20261125-000000-ps"
    run_dir.mkdir(parents=True)
    (runs / "latest").symlink_to(run_dir.name)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump({"run": {"restart": "on-failure"}}))
    env = {"SYNCLAB_TOKEN": "t", "SYNCLAB_RUNS_DIR": str(runs), "SYNCLAB_CONNECT_TIMEOUT": "1",
           "SYNCLAB_COORDINATOR": f"127.0.0.1:{server.getsockname()[1]}"}
    rejoin = entrypoint.node_rejoin(ContainerSettings.from_env(env))
    stopping = threading.Event()
    assert rejoin(stopping)
    (run_dir / "status.json").write_text(json.dumps({"status": "restarting"}))
    assert rejoin(stopping)
    (run_dir / "status.json").write_text(json.dumps({"status": "failed"}))
    assert not rejoin(stopping)  # the coordinator gave up: the node's failure stands
    (run_dir / "status.json").write_text(json.dumps({"status": "restarting"}))
    server.close()
    assert not rejoin(stopping)  # no coordinator within SYNCLAB_CONNECT_TIMEOUT


def test_the_taken_up_job_resumes_in_its_run_directory_and_counts_the_restart(entrypoint, tmp_path, monkeypatch):
    runs = tmp_path / "runs"
    run_dir = restart_run_dir(runs)
    (runs / "latest").symlink_to("run")
    monkeypatch.setattr(entrypoint.host, "JOB_SPEC_FILE", tmp_path / "job-spec.yaml")
    entrypoint.JOB_SPEC_FILE.write_text((run_dir / "spec.yaml").read_text())
    settings = ContainerSettings.from_env({"SYNCLAB_TOKEN": "t", "SYNCLAB_RUNS_DIR": str(runs)})
    next_job = entrypoint.coordinator_job(settings, {"profile": None, "backend": "none"})
    job = next_job()
    assert job.run_dir == run_dir and str(run_dir / "spec-restart.yaml") in job.cmd
    assert [r["resumed_from"] for r in job.restarts] == [10]
    assert json.loads((run_dir / "status.json").read_text())["status"] == "restarting"
    assert next_job().run_dir != run_dir  # only the first job is taken up


# Stage two whose job has ended: its supervisor's handler is in place, a library has a thread of its own
# (torch starts one at import), and a SIGTERM comes while the process exits (compose stopping every node
# as the coordinator's container exits).
DECIDED_THEN_STOPPED = """
import signal, sys, threading, time
from synclab.roles.container import main, supervise

def run_role(role):
    signal.signal(signal.SIGTERM, lambda *_: None)
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
    print("decided", flush=True)
    time.sleep(0.2)
    return 0

supervise.run_role = run_role
code = main.main(["--as-user", "worker"], sys.argv[1])
time.sleep(0.2)
sys.exit(code)
"""


def test_a_stop_while_the_node_exits_leaves_its_exit_code_alone(entrypoint):
    import subprocess
    import time

    from support.entrypoint import SHIM

    proc = subprocess.Popen([sys.executable, "-c", DECIDED_THEN_STOPPED, str(SHIM)], stdout=subprocess.PIPE,
                            text=True)
    assert proc.stdout.readline().strip() == "decided"
    deadline = time.monotonic() + 30
    while proc.poll() is None and time.monotonic() < deadline:
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.005)
    assert proc.wait(timeout=10) == 0


def test_the_supervisor_reads_its_settings_without_torch():
    """Stage two imports its settings and the supervisor only: no torch (seconds of start-up per container,
    and threads of its own)."""
    import subprocess

    code = ("import sys\n"
            "import synclab.config.settings, synclab.roles.container.main, synclab.roles.container.supervise\n"
            "import synclab.wire.tls\n"
            "print(sorted(m for m in ('torch', 'numpy') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
