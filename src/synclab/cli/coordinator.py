"""``synclab coordinator``: the coordinator process of one job."""

from __future__ import annotations

from pathlib import Path

import typer

from synclab.cli._common import TokenOpt, exit_process, fail, setup_logging


def coordinator(spec: Path = typer.Option(..., "--spec"), run_dir: Path = typer.Option(..., "--run-dir"),
                listen: str = typer.Option("0.0.0.0:50051", "--listen"), token: str = TokenOpt,
                metrics_port: int = typer.Option(0, "--metrics-port"),
                verbose: bool = typer.Option(False, "-v", "--verbose")):
    """Run the coordinator of one job (registers nodes, barriers, heartbeats, run records)."""
    from synclab.config import SpecError, load_spec
    from synclab.roles.coordinator import run_coordinator

    setup_logging(verbose)
    try:
        s = load_spec(spec)
    except SpecError as e:
        fail(f"invalid spec: {e}")
    exit_process(run_coordinator(s, run_dir, listen, token, metrics_port=metrics_port))
