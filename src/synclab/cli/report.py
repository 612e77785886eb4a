"""``synclab report``: the summary table and plots of a run directory."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from synclab.cli._common import console, fail


def show_report(run_dir: Path) -> None:
    from synclab.report import load_run, summary_table, write_report

    records = load_run(run_dir)
    Console().print(summary_table(records))
    for p in write_report(run_dir):
        console.print(f"plot: {p}")


def report_cmd(run_dir: Path = typer.Argument(..., help="A run directory written by `synclab run`.")):
    """Print the summary table of a run and write its plots (PNG) into the run directory."""
    try:
        show_report(run_dir)
    except (FileNotFoundError, ValueError) as e:  # missing, unreadable or malformed records, each named
        fail(str(e))
