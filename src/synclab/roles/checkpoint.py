"""Checkpoints of a running job, and the one a restarted job resumes from.

Layout in the run directory::

    checkpoint/00000010/worker0.pt, ..., ps0.pt, ..., coordinator.pt
    checkpoint/LATEST            "10": the last checkpoint every node completed

Every node writes its own file atomically (write a temporary file, fsync, rename,
fsync the directory), then arrives at the barrier ``checkpoint-N``. The
coordinator, once every node has arrived, writes its own file and then
``LATEST``: a checkpoint is consistent exactly when ``LATEST`` names it, so a
crash at any moment leaves either the previous checkpoint or the new one, never a
mix. The two newest checkpoints are kept.

The cut is consistent because workers drain iteration N's synchronization
before saving (every parameter fresh) and do not push iteration N+1 until the
barrier has passed, and a shard saves only once every update of iteration N is
applied and every pull answered (:meth:`synclab.ps.shard.Shard.wait_settled`).
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path
from typing import Any

from synclab.fileio import write_atomic

ROOT = "checkpoint"
KEEP = 2


def barrier_name(iteration: int) -> str:
    return f"checkpoint-{iteration}"


def iteration_of_barrier(name: str) -> int | None:
    head, _, tail = name.partition("-")
    return int(tail) if head == "checkpoint" and tail.isdigit() else None


def directory(run_dir: Path, iteration: int) -> Path:
    return Path(run_dir) / ROOT / f"{iteration:08d}"


def save(run_dir: Path, iteration: int, node: str, state: dict[str, Any]) -> Path:
    import torch  # here, not at the top: a container's supervisor reads latest() without torch

    buf = io.BytesIO()
    torch.save({"iteration": iteration, "node": node, **state}, buf)
    path = directory(run_dir, iteration) / f"{node}.pt"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, buf.getvalue())
    return path


def load(run_dir: Path, iteration: int, node: str) -> dict[str, Any]:
    import torch

    path = directory(run_dir, iteration) / f"{node}.pt"
    if not path.exists():
        raise FileNotFoundError(f"checkpoint {iteration} has no state for {node} ({path})")
    state = torch.load(path, weights_only=False)
    if state.get("iteration") != iteration or state.get("node") != node:
        raise ValueError(f"{path} holds {state.get('node')!r} at iteration {state.get('iteration')}, "
                         f"not {node!r} at {iteration}")
    return state


def commit(run_dir: Path, iteration: int, nodes: list[str]) -> None:
    """Mark checkpoint ``iteration`` consistent (every node's file is there), then drop older ones."""
    d = directory(run_dir, iteration)
    missing = [n for n in nodes if not (d / f"{n}.pt").exists()]
    if missing:
        raise FileNotFoundError(f"checkpoint {iteration} lacks the state of {', '.join(missing)}")
    write_atomic(Path(run_dir) / ROOT / "LATEST", f"{iteration}\n")
    kept = sorted(p for p in (Path(run_dir) / ROOT).iterdir() if p.is_dir() and p.name.isdigit())
    for old in kept[:-KEEP]:
        shutil.rmtree(old, ignore_errors=True)


def latest(run_dir: Path) -> int:
    """The last consistent checkpoint's iteration; 0 when there is none."""
    path = Path(run_dir) / ROOT / "LATEST"
    if not path.exists():
        return 0
    return int(path.read_text().strip() or 0)
