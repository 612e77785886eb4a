"""Stage two of a role's container (unprivileged): run the role's jobs, pass stops on, restart or rejoin.

This process stays as a small supervisor of the role: it runs ``SYNCLAB_REPEAT``
jobs (0: forever, a new run directory each time), passes SIGTERM/SIGINT on to the
running role, and for the coordinator writes ``status.json`` after each job. What
one job is, and how a failed one is restarted, is :mod:`.jobs`.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time

from synclab.roles.container import host
from synclab.roles.container.host import log, read_settings
from synclab.roles.container.jobs import (
    RESTARTING,
    Job,
    coordinator_job,
    coordinator_restart,
    exit_code,
    job_has_ended,
    job_status,
    node_job,
    node_rejoin,
    wait_for_job_end,
    write_status,
)


def run_role(role: str) -> int:
    """Stage two (unprivileged): run the role's jobs under :func:`supervise`."""
    settings = read_settings()
    outcome = json.loads(host.SHAPING_FILE.read_text())
    if role == "coordinator":
        next_job, linger, rejoin = coordinator_job(settings, outcome), None, None
        restart = coordinator_restart(settings)
    else:
        next_job, restart, rejoin = node_job(role, settings), None, node_rejoin(settings)

        def linger(stopping: threading.Event) -> None:
            wait_for_job_end(settings.coordinator, stopping)

    verbose = ["-v"] if settings.verbose else []
    return supervise(next_job, verbose, dict(os.environ), settings.repeat, role, linger=linger,
                     restart=restart, rejoin=rejoin)


def supervise(next_job, verbose: list[str], env: dict, repeat: int, role: str, *, linger=None, restart=None,
              rejoin=None) -> int:
    """Run the role's jobs and return the container's exit code.

    ``repeat`` 0 reruns jobs until the container is stopped (exit 0); N > 1 runs until N jobs
    succeeded, rerunning failed ones; 1 (one-shot) runs one job and exits with its code, 128 + N
    when signal N ended it. SIGTERM/SIGINT are passed on to the running role, except to a
    coordinator whose records are already written: it finishes, and its outcome stands. Each
    coordinator job gets status.json. ``linger(stopping)``, when given, runs after the last job
    (not with ``repeat`` 0) and blocks until the whole job has ended (a node waits for its
    coordinator).

    ``restart(job, restarts_so_far)`` (the coordinator) returns the next attempt of a failed job and
    the checkpoint it resumes from, or None; attempts are not jobs (``repeat`` counts jobs), and
    status.json says ``restarting`` between them and lists every restart in the end.
    ``rejoin(stopping)`` (a worker or PS shard) says whether a failed role should run again at once
    to join such an attempt, with any ``repeat``.
    """
    child: subprocess.Popen | None = None
    job: Job | None = None
    stopping = threading.Event()
    passed_on: list[str] = []  # the signal handed to the current job, if any

    def forward(signum, _frame):
        stopping.set()
        if child is not None and child.poll() is None and not job_has_ended(job):
            passed_on.append(signal.Signals(signum).name)
            child.send_signal(signum)

    def attempt() -> int:
        nonlocal child
        passed_on[:] = []
        if job.start_after_s:
            log(f"{role}: starting the next attempt in {job.start_after_s:g} s, once every node has "
                f"given up the last one")
            stopping.wait(job.start_after_s)
        host.JOB_STARTED_FILE.touch()
        child = subprocess.Popen(job.cmd + verbose, env=env)
        if stopping.is_set() and not passed_on:  # the stop came between two jobs
            forward(signal.SIGTERM, None)
        return child.wait()

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    done, failures_in_row, code = 0, 0, 0
    while not stopping.is_set() and (repeat == 0 or done < repeat):
        job = next_job()
        restarts = list(job.restarts)
        while True:
            returncode = attempt()
            code = exit_code(returncode)
            if job.run_dir is None:
                break
            status = job_status(returncode, job.run_dir, passed_on[0] if passed_on else None)
            again = restart(job, len(restarts)) if code and restart and not stopping.is_set() else None
            if again is None:
                write_status(job.run_dir, {**status, "restarts": restarts} if restarts else status)
                break
            job, resumed_from = again
            restarts.append({"reason": status["reason"], "exit_code": code, "resumed_from": resumed_from,
                             "at": time.time()})
            write_status(job.run_dir, {**status, "status": RESTARTING, "restarts": restarts})
        if stopping.is_set():
            break
        if code == 0:
            done, failures_in_row = done + 1, 0
            log(f"{role}: job {done} finished")
        elif rejoin is not None and rejoin(stopping):
            # The coordinator restarts the job: join its next attempt (a failed job is not a finished one).
            log(f"{role}: exited with {code}; the job restarts from its last checkpoint: joining it again")
            stopping.wait(1.0)  # a coordinator still closing the failed attempt refuses registrations
        elif repeat == 1:
            log(f"{role}: exited with {code}")
            break
        else:
            # A node that restarts faster than the coordinator between jobs is refused
            # once; a failed job is rerun. Back off so a persistent fault stays readable.
            failures_in_row += 1
            delay = min(30.0, 0.5 * 2 ** min(failures_in_row, 6))
            log(f"{role}: exited with {code}; starting again in {delay:g} s")
            stopping.wait(delay)
    if repeat == 0:
        return 0 if stopping.is_set() else code
    if linger is not None and not stopping.is_set():
        host.JOB_STARTED_FILE.touch()  # no /metrics while waiting: the health grace covers the wait (Swarm)
        linger(stopping)
    return code
