"""``synclab run``: launch a local cluster for a spec and run it to completion."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

import typer
import yaml

from synclab import hostlock
from synclab.cli._common import console, fail
from synclab.cli.report import show_report
from synclab.fileio import write_atomic


def run(spec: Path = typer.Argument(..., help="Experiment spec (YAML), or a packaged example by name (see synclab examples)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<time>-<strategy>)."),
        set_: list[str] = typer.Option([], "--set", help="Override a spec key: dotted.key=value (repeatable)."),
        report: bool = typer.Option(True, help="Write plots and print the summary table at the end.")):
    """Launch a local cluster for SPEC and run it to completion; writes the run records into --out."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.config import SpecError
    from synclab.roles.job import cluster_for, resolve_job
    from synclab.roles.launcher import supervise

    try:
        job = resolve_job(spec, set_)
    except SpecError as e:
        fail(f"invalid spec: {e}")
    s, net = job.spec, job.network
    run_dir = out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{s.strategy.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    write_atomic(run_dir / "spec.yaml", yaml.safe_dump(s.to_dict(), sort_keys=False))
    for stale in ("summary.json", "failure.json", "status.json"):
        (run_dir / stale).unlink(missing_ok=True)
    cluster = cluster_for(job, run_dir)
    console.print(f"[bold]{s.name}[/]: strategy [cyan]{s.strategy.name}[/], model {s.model.name}, "
                  f"{s.n_workers} worker(s), {s.n_ps} PS shard(s), {net.describe()} -> {run_dir}")
    console.print(f"  {job.dilation.describe()}")
    for note in job.notes:
        console.print(f"  note: {note}")
    # one emulation on the host's cores at a time (a no-op under `flock` or inside a test that holds it)
    with hostlock.hold(say=lambda msg: console.print(f"  {msg}")):
        try:
            cluster.start()
        except KeyboardInterrupt:
            cluster.terminate()
            fail("interrupted while the cluster was starting; nothing is left running", 130)
        except Exception as e:  # e.g. a namespace, tc or Docker step failed: nothing is left behind
            cluster.terminate()
            fail(f"could not start the cluster: {e}", 1)
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TimeElapsedColumn(), console=console, transient=False) as progress:
            task = progress.add_task("iterations", total=s.run.iterations)
            status = supervise(cluster, on_progress=lambda done, total: progress.update(task, completed=done))
            if status["status"] == "ok":
                progress.update(task, completed=s.run.iterations)
    if status["status"] != "ok":
        fail(f"run {status['status']}: {status['reason']} (records in {run_dir})",
              code=130 if status["status"] == "interrupted" else 1)
    if report:
        show_report(run_dir)
    console.print(f"run records: {run_dir}")
