"""``synclab chaos``: inject a fault into a running job (or every fault across the strategy families) and
record whether it recovered bit-identically or failed cleanly (:mod:`synclab.chaos`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from synclab.cli._common import console, fail


def chaos(spec: Optional[str] = typer.Argument(None, help="Experiment spec (YAML) or packaged example; with "
                                               "--matrix, the matrix YAML (default: the packaged one)."),
          fault: list[str] = typer.Option([], "--fault", help="kill:ROLE | drop:LINK:SECONDS | flap:LINK | "
                                          "disk-full (ROLE/LINK: coordinator, ps, worker, fc or a node name); "
                                          "repeatable."),
          matrix: bool = typer.Option(False, "--matrix", help="Every fault of the matrix YAML on one strategy of "
                                      "each family; one record per cell under --out."),
          only: list[str] = typer.Option([], "--only", help="With --matrix: only these cells, FAMILY/FAULT "
                                         "(e.g. ps/kill:ps) or a family or a fault; repeatable."),
          set_: list[str] = typer.Option([], "--set", help="Override a spec key: dotted.key=value (repeatable)."),
          out: Path = typer.Option(Path("runs/chaos"), "--out", help="Where the runs and the records go."),
          heartbeat_timeout: float = typer.Option(10.0, "--heartbeat-timeout", min=0.5,
                                                  help="run.heartbeat_timeout_s of the chaos jobs."),
          doc: bool = typer.Option(False, "--doc", help="With --matrix: also copy the records to "
                                   "docs/results/fault-matrix/ and rewrite docs/results/fault-matrix.md.")):
    """Run SPEC with run.restart=on-failure and checkpoints, inject each --fault half-way, and check the job
    either ends ok with parameters bit-identical to an undisturbed run or fails within the heartbeat timeout
    naming the fault, leaving no process or namespace behind. Exit 1 when a cell is a VIOLATION."""
    from synclab.chaos.cell import default_isolation, run_cell
    from synclab.chaos.faults import FaultError, parse_fault
    from synclab.config import SpecError

    try:
        faults = [parse_fault(f) for f in fault]
    except FaultError as e:
        fail(str(e))
    if matrix:
        _matrix(spec, faults, only, set_, out, heartbeat_timeout, doc)
        return
    if spec is None or not faults:
        fail("give a SPEC and at least one --fault (or --matrix)")
    records = []
    baselines: dict[str, Path] = {}  # one undisturbed run per isolation the faults run under
    for f in faults:
        cell_dir = out / f.label.replace(":", "-")
        isolation = "netns" if f.needs_netns else default_isolation()
        try:
            r = run_cell(spec, list(set_), f, cell_dir, heartbeat_timeout_s=heartbeat_timeout,
                         baseline=baselines.get(isolation))
            baselines.setdefault(isolation, cell_dir / "baseline")
        except (SpecError, FaultError) as e:
            fail(f"{f.label}: {e}")
        except RuntimeError as e:
            fail(f"{f.label}: {e}", 1)
        records.append(r)
        console.print(f"{f.label}: [bold]{r['outcome']}[/] ({_timing(r)})")
    if any(r["outcome"].startswith(("VIOLATION", "ERROR")) for r in records):
        raise typer.Exit(1)


def _timing(r: dict) -> str:
    if "restart_after_fault_s" in r:
        return f"restarted {r['restart_after_fault_s']:g} s after the fault, ended {r['end_after_fault_s']:g} s after"
    if "end_after_fault_s" in r:
        return f"ended {r['end_after_fault_s']:g} s after the fault"
    return "no fault injected"


def _matrix(spec, faults, only, set_, out, heartbeat_timeout, doc) -> None:
    from synclab.chaos.matrix import MatrixError, load_matrix, run_matrix

    try:
        m = load_matrix(spec, extra_faults=faults, extra_settings=list(set_))
    except MatrixError as e:
        fail(str(e))
    from synclab.chaos.doc import write_records

    def on_cell(family: str, r: dict) -> None:
        console.print(f"{family} × {r['fault']}: [bold]{r['outcome']}[/] ({_timing(r)})")
        if doc:  # each cell's record as soon as it is known: a matrix cut short keeps what it measured
            for path in write_records([r], Path.cwd()):
                console.print(f"  wrote {path}")

    records = run_matrix(m, out, only=only, heartbeat_timeout_s=heartbeat_timeout, on_cell=on_cell)
    console.print(json.dumps({"cells": len(records), "violations": sum(r["outcome"].startswith(("VIOLATION", "ERROR"))
                                                                      for r in records)}))
    if any(r["outcome"].startswith(("VIOLATION", "ERROR")) for r in records):
        raise typer.Exit(1)
