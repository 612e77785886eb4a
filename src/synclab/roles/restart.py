"""The restart policy of a job, one for every launcher (``synclab run`` and the container supervisor).

With ``run.restart: on-failure`` a failed job is started again, up to
``run.max_restarts`` times, in the same run directory, from its last consistent
checkpoint (:func:`synclab.roles.checkpoint.latest`; 0 when there is none: from
the start). The restart is the whole job, as in torchelastic: a synchronous job
cannot go on without one of its nodes. Each attempt gets the job's spec with only
``run.resume_from`` changed, written beside the first one as ``spec-restart.yaml``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from synclab.fileio import write_atomic

RESTART_SPEC = "spec-restart.yaml"


def restart_due(run: Any, restarts_so_far: int) -> bool:
    """Whether a failed attempt is restarted, given the job's ``run`` section (a ``RunSpec``, or the
    mapping of a ``spec.yaml``) and the restarts it already had."""
    if isinstance(run, Mapping):
        restart, most = run.get("restart"), run.get("max_restarts", 0)
    else:
        restart, most = run.restart, run.max_restarts
    return restart == "on-failure" and restarts_so_far < most


def resume_spec(spec: dict, resume_from: int) -> dict:
    """The job's spec (as a mapping) for an attempt that resumes from checkpoint ``resume_from`` (0: from the start)."""
    return {**spec, "run": {**spec["run"], "resume_from": resume_from}}


def next_attempt(run_dir: Path, spec: dict) -> tuple[Path, int]:
    """Prepare the next attempt of the failed job in ``run_dir``: its ``failure.json`` goes (the next
    attempt's records are its own and it must not look ended), the spec that resumes from the last
    consistent checkpoint is written; returns that spec's path and the checkpoint's iteration."""
    import yaml

    from synclab.roles import checkpoint

    (run_dir / "failure.json").unlink(missing_ok=True)
    resume = checkpoint.latest(run_dir)
    spec_path = run_dir / RESTART_SPEC
    write_atomic(spec_path, yaml.safe_dump(resume_spec(spec, resume), sort_keys=False))
    return spec_path, resume
