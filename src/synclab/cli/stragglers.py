"""``synclab stragglers``: simulated throughput of each strategy against one slow worker's factor
(:mod:`synclab.stragglers.sweep`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from synclab.cli._common import console, fail


def stragglers(spec: Path = typer.Argument(..., help="Experiment spec (YAML) or a packaged example by name."),
               strategies: str = typer.Option(..., "--strategies", help="Comma-separated strategies to compare "
                                              "(each needs a simulator model; synclab strategies lists them)."),
               factors: str = typer.Option("1.5,2,3,4", "--factors", help="Comma-separated compute factors of the "
                                           "last worker (1 is always added as the reference)."),
               set_: list[str] = typer.Option([], "--set", help="Override a spec key: dotted.key=value."),
               out: Optional[Path] = typer.Option(None, "--out", help="Output directory (default "
                                                  "runs/<time>-stragglers).")):
    """One slow worker: simulate each strategy at each factor; writes stragglers.csv and stragglers.png."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.config import SpecError
    from synclab.resources import spec_path
    from synclab.stragglers.sweep import sweep, write

    try:
        fs = [float(x) for x in factors.split(",") if x.strip()]
    except ValueError:
        fail(f"--factors {factors!r} must be comma-separated numbers")
    names = [x.strip() for x in strategies.split(",") if x.strip()]
    if not names or not fs or any(f <= 0 for f in fs):
        fail("--strategies needs at least one name and --factors numbers > 0")
    out = out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-stragglers"
    path = spec_path(spec)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("simulated points", total=len(names) * len(set([1.0, *fs])))
        try:
            rows = sweep(path, names, fs, overrides=list(set_), on_point=lambda r: progress.update(task, advance=1))
        except (SpecError, KeyError) as e:
            fail(f"invalid spec: {e}")
    csv_path, png_path = write(rows, out, title=f"{path.stem}: one slow worker of {rows[0]['workers']}")
    for r in rows:
        if r["factor"] != 1.0:
            console.print(f"{r['strategy']:>10} f={r['factor']:g}: {r['relative'] * 100:5.1f} % of its throughput "
                          f"(lockstep bound {r['lockstep_bound'] * 100:.1f} %, no-wait bound "
                          f"{r['independent_bound'] * 100:.1f} %)")
    console.print(f"-> {csv_path}, {png_path}")
