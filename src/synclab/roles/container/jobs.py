"""One job of a role in a container: its command line, its run directory and records, and its restarts.

A coordinator container makes a new run directory per job (``runs/latest``
names it) and writes ``status.json`` after each, in the terms of ``synclab run``;
a worker or PS shard container runs its role's command line. With
``run.restart: on-failure`` the coordinator's next attempt runs in the same run
directory from the last consistent checkpoint (:mod:`synclab.roles.restart`, the
policy ``synclab run`` uses too), and a node whose role failed joins it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from synclab.fileio import write_atomic
from synclab.roles.container import host
from synclab.roles.container.host import log, read_record
from synclab.roles.restart import next_attempt, restart_due

if TYPE_CHECKING:
    from synclab.config.settings import ContainerSettings

STATUS_FILE = "status.json"
# What status.json says when a stop signal ended a job; under `up --exit-code-from` the usual cause is
# another container that exited first.
STOPPED = ("stopped by {signal} before the job ended (docker compose stop or down, or "
           "--abort-on-container-exit after another container exited)")
RESTARTING = "restarting"  # status.json between two attempts of a job; ok / failed / interrupted are final


class Job(NamedTuple):
    """One run of a role: its command line and, for the coordinator, the run directory it fills
    (and the restarts it already had, when a restarted container takes up an unfinished job)."""

    cmd: list[str]
    run_dir: Path | None = None
    restarts: tuple[dict, ...] = ()
    start_after_s: float = 0.0  # wait before starting it (see nodes_lost_coordinator_s)


# -- run directories and their records -----------------------------------------------------------
def new_run_dir(runs: Path, strategy: str) -> Path:
    stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
    run_dir = runs / f"{stamp}-{strategy}"
    n = 1
    while run_dir.exists():
        n += 1
        run_dir = runs / f"{stamp}-{strategy}-{n}"
    run_dir.mkdir(parents=True)
    return run_dir


def point_latest(runs: Path, run_dir: Path) -> None:
    """Make ``runs/latest`` name ``run_dir`` (replaced atomically)."""
    latest, tmp = runs / "latest", runs / ".latest.tmp"
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(run_dir.name)
    tmp.replace(latest)


def exit_code(returncode: int) -> int:
    """A child's return code as a shell and Docker report it: killed by signal N is 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def job_status(returncode: int, run_dir: Path, interrupted_by: str | None = None) -> dict:
    """The ``status.json`` record of one coordinator job, in the launcher's terms (``synclab run``).

    ``ok`` when the coordinator exited 0; ``failed`` with the coordinator's own reason when it
    failed the job (``failure.json``: a node that died, stopped heartbeats, ...) or else with its
    exit code; ``interrupted`` when ``interrupted_by`` (a signal this container passed on to the
    coordinator) ended the job first. The launcher's ``exit_codes`` holds every process of the
    job; a container sees only its own, the coordinator's.
    """
    code = exit_code(returncode)
    failure = None
    try:
        failure = json.loads((run_dir / "failure.json").read_text())
    except (OSError, ValueError):
        pass
    if code == 0:
        status = {"status": "ok", "reason": ""}
    elif failure is not None:
        status = {"status": "failed", "reason": failure.get("reason", ""), "nodes_done": failure.get("nodes_done", [])}
    elif interrupted_by:
        status = {"status": "interrupted", "reason": STOPPED.format(signal=interrupted_by)}
    else:
        status = {"status": "failed", "reason": f"coordinator exited with code {code} "
                                                f"(its log: docker compose logs coordinator)"}
    status["exit_codes"] = {"coordinator": code}
    return status


def write_status(run_dir: Path, status: dict) -> None:
    write_atomic(run_dir / STATUS_FILE, json.dumps(status, indent=2) + "\n")
    log(f"job {status['status']}" + (f": {status['reason']}" if status["reason"] else "")
        + f" ({run_dir / STATUS_FILE})")


def job_has_ended(job: Job | None) -> bool:
    """Whether a coordinator job has written its final records and is only closing down."""
    return job is not None and job.run_dir is not None and any(
        (job.run_dir / name).exists() for name in ("summary.json", "failure.json"))


# -- the coordinator's jobs ----------------------------------------------------------------------
def coordinator_cmd(spec_path: Path, run_dir: Path, settings: ContainerSettings) -> list[str]:
    listen_host = host.advertise_address(settings.shape_device)  # the cluster interface only, not every one
    return ["synclab", "coordinator", "--spec", str(spec_path), "--run-dir", str(run_dir),
            "--listen", f"{listen_host}:{settings.listen_port}", "--metrics-port", str(settings.metrics_port)]


def coordinator_job(settings: ContainerSettings, outcome: dict):
    """A callable that prepares one job's run directory and returns the :class:`Job`."""
    import yaml

    spec_text = host.JOB_SPEC_FILE.read_text()
    strategy = yaml.safe_load(spec_text)["strategy"]["name"]
    runs = settings.runs_dir
    # A job this container (or the task it replaces) left unfinished is taken up first.
    unfinished = [unfinished_run(runs, spec_text)]

    def next_job() -> Job:
        if unfinished and (found := unfinished.pop()) is not None:
            run_dir, restarts = found
            job, resume = resumed_attempt(run_dir, yaml.safe_load(spec_text), settings, len(restarts))
            restarts.append({"reason": "the coordinator's container started again before the job had an outcome",
                             "exit_code": None, "resumed_from": resume, "at": time.time()})
            write_status(run_dir, {"status": RESTARTING, "reason": restarts[-1]["reason"],
                                   "exit_codes": {}, "restarts": restarts})
            return job._replace(restarts=tuple(restarts))
        run_dir = new_run_dir(runs, strategy)
        spec_path = run_dir / "spec.yaml"
        spec_path.write_text(spec_text)
        (run_dir / "shaping-coordinator.json").write_text(json.dumps(outcome, indent=2) + "\n")
        point_latest(runs, run_dir)
        log(f"job {run_dir}")
        return Job(coordinator_cmd(spec_path, run_dir, settings), run_dir)

    return next_job


def nodes_lost_coordinator_s(run: dict) -> float:
    """How long after a coordinator died without a word every node of its attempt has given it up: a
    node stops after 5 heartbeats in a row fail (``CoordinatorClient.start_heartbeat``), plus margin.
    The next attempt listens at the same address only then, so no process of the dead attempt
    heartbeats it or tells it that it failed."""
    return 5 * run.get("heartbeat_s", 1.0) + 2.0


def resumed_attempt(run_dir: Path, spec: dict, settings: ContainerSettings, restarts_so_far: int) -> tuple[Job, int]:
    """The next attempt of the job in ``run_dir``, from its last consistent checkpoint."""
    # failure.json: the coordinator failed the attempt itself and told every node to stop. Without it
    # the coordinator died, and its nodes notice only when their heartbeats have failed for a while.
    told = (run_dir / "failure.json").exists()
    spec_path, resume = next_attempt(run_dir, spec)
    log(f"restarting the job in {run_dir} from checkpoint {resume} "
        f"(restart {restarts_so_far + 1} of {spec['run']['max_restarts']})")
    wait_s = 0.0 if told else nodes_lost_coordinator_s(spec["run"])
    return Job(coordinator_cmd(spec_path, run_dir, settings), run_dir, start_after_s=wait_s), resume


def coordinator_restart(settings: ContainerSettings):
    """A callable ``restart(job, restarts_so_far)`` that prepares the next attempt of a failed job in
    its own run directory, resuming from ``checkpoint.latest`` (``(Job, resume_from)``), or returns
    None when the spec does not ask for another one."""

    def restart(job: Job, restarts_so_far: int):
        spec = read_record(job.run_dir / "spec.yaml")
        if not spec or not restart_due(spec.get("run", {}), restarts_so_far):
            return None
        return resumed_attempt(job.run_dir, spec, settings, restarts_so_far)

    return restart


def unfinished_run(runs: Path, spec_text: str) -> tuple[Path, list[dict]] | None:
    """The job ``runs/latest`` names, with its restarts so far, when a coordinator container that
    starts again should take it up instead of starting a new one: the same resolved spec, with
    ``run.restart: on-failure`` and a restart left, no summary, and no final status (the previous
    container died before it could write one: killed, or its host went down)."""
    latest = runs / "latest"
    if not latest.is_symlink():
        return None
    run_dir = runs / os.readlink(latest)
    try:
        if (run_dir / "spec.yaml").read_text() != spec_text or (run_dir / "summary.json").exists():
            return None
    except OSError:
        return None
    status = read_record(run_dir / STATUS_FILE)
    if status is not None and status.get("status") != RESTARTING:
        return None
    restarts = list((status or {}).get("restarts", []))
    spec = read_record(run_dir / "spec.yaml") or {}
    return (run_dir, restarts) if restart_due(spec.get("run", {}), len(restarts)) else None


# -- a worker's or PS shard's jobs ---------------------------------------------------------------
def node_job(role: str, settings: ContainerSettings):
    coordinator, port, timeout = settings.coordinator, settings.port, settings.connect_timeout_s
    advertise = host.advertise_address(settings.shape_device)
    index_flag = "--rank" if role == "worker" else "--shard"
    cmd = ["synclab", role, index_flag, "-1", "--coordinator", coordinator, "--host", advertise,
           "--advertise", advertise, "--port", str(port), "--metrics-port", str(settings.metrics_port),
           "--connect-timeout", str(timeout)]
    log(f"{role} at {advertise}:{port}, coordinator {coordinator}")
    return lambda: Job(cmd)


def rejoin_due(spec: dict | None, status: dict | None) -> bool:
    """Whether a worker or PS shard whose role failed should run it again to join the job's next
    attempt: the job restarts on failure, and its coordinator has not recorded a final outcome."""
    if not spec or spec.get("run", {}).get("restart") != "on-failure":
        return False
    return status is None or status.get("status") == RESTARTING


def node_rejoin(settings: ContainerSettings):
    """A callable ``rejoin(stopping)`` for a worker or PS shard whose role failed: True when it should
    run the role again because the job restarts (read from ``runs/latest``, which the coordinator
    points at the job) and the coordinator serves, now or within SYNCLAB_CONNECT_TIMEOUT."""
    latest = settings.runs_dir / "latest"

    def rejoin(stopping: threading.Event) -> bool:
        if not rejoin_due(read_record(latest / "spec.yaml"), read_record(latest / STATUS_FILE)):
            return False
        deadline = time.monotonic() + settings.connect_timeout_s
        while not coordinator_serving(settings.coordinator):
            if time.monotonic() > deadline or stopping.wait(0.5):
                return False
        return True

    return rejoin


def coordinator_serving(address: str, timeout_s: float = 2.0) -> bool:
    """Whether something accepts TCP connections at ``host:port`` (the coordinator's job server)."""
    hostname, _, port = address.rpartition(":")
    try:
        with socket.create_connection((hostname.strip("[]"), int(port)), timeout=timeout_s):
            return True
    except (OSError, ValueError):
        return False


def wait_for_job_end(address: str, stopping: threading.Event, poll_s: float = 0.5) -> None:
    """Block until the coordinator at ``address`` stops serving, or this container is stopped.

    The coordinator closes its server only after its records (summary.json or failure.json) are
    written. Nothing on the wire announces that to a node that has already left the job, so this
    asks the port: a refused (or unresolvable) address means the job has ended.
    """
    if not coordinator_serving(address):
        return
    log(f"waiting for the coordinator at {address} to end the job")
    while not stopping.wait(poll_s):
        if not coordinator_serving(address):
            return
