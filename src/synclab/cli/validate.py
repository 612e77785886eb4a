"""``synclab validate``: the simulator against the emulator, the grid of points and its results page."""

from __future__ import annotations

import shlex
import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from synclab.cli._common import fail

app = typer.Typer(no_args_is_help=True, invoke_without_command=True,
                  help="Validate the simulator against the emulator: points drawn at random (--random N --seed S), "
                       "a grid of points on both (grid), compare two validations (compare), regenerate "
                       "docs/results/validation.md from the records (doc).")
console = Console(stderr=True)


@app.callback()
def random_sample(ctx: typer.Context,
                  random_n: Optional[int] = typer.Option(None, "--random", metavar="N", min=1, help="Draw N points "
                                                         "at random (strategy, workers, PS shards, 1-10 Gbit/s, "
                                                         "delay, replayed model and scale) and run each on the "
                                                         "emulator at the D its run picks and on the simulator "
                                                         "with its defaults."),
                  seed: int = typer.Option(0, "--seed", help="The draw's seed: the same seed, the same points."),
                  spec: str = typer.Option("quickstart", "--spec", help="Base spec of every point (--random)."),
                  max_workers: int = typer.Option(8, "--max-workers", min=2, help="Most workers a point may draw "
                                                  "(--random; 8: what a 2-core host emulates in minutes)."),
                  max_point_s: float = typer.Option(180.0, "--max-point-s", help="A point estimated above this "
                                                    "many host seconds is drawn again (--random; counted)."),
                  strategies: Optional[str] = typer.Option(None, "--strategies", help="Comma-separated "
                                                           "strategies to draw from (--random; default: every "
                                                           "registered one with a simulator model but local). "
                                                           "Pin a record's list to continue its sample after a "
                                                           "strategy joined."),
                  models: Optional[str] = typer.Option(None, "--models", help="Comma-separated replayed models "
                                                       "to draw from (--random; default: six CNNs from ResNet-20 "
                                                       "to VGG-16)."),
                  iterations: int = typer.Option(8, "--iterations", min=4, help="run.iterations of every point "
                                                 "(--random; 2 warm-up)."),
                  out: Optional[Path] = typer.Option(None, "--out", help="Run directory (--random; default "
                                                     "runs/validate-random-sSEED); points already there are "
                                                     "reused, so a sample runs in pieces."),
                  lock: Optional[str] = typer.Option(None, "--lock", help="flock this file around each emulated "
                                                     "point (--random)."),
                  list_only: bool = typer.Option(False, "--list", help="Print the drawn points and stop "
                                                 "(--random)."),
                  explain: bool = typer.Option(False, "--explain", help="Simulate every point beyond ±10 % again "
                                               "with one of the emulator's artifacts modelled at a time (its "
                                               "start-up at D, its host, its tbf buckets): explain.csv (--random)."),
                  record: Optional[str] = typer.Option(None, "--record", metavar="NAME", help="Also copy the "
                                                       "results into docs/validation/NAME/ of this checkout "
                                                       "(--random).")):
    """Without a command: ``--random N --seed S`` validates on N points drawn at random."""
    if ctx.invoked_subcommand is not None:
        if random_n is not None:
            fail(f"--random goes without a command (synclab validate --random N), not with {ctx.invoked_subcommand!r}")
        return
    if random_n is None:
        typer.echo(ctx.get_help())
        raise typer.Exit(2)
    _run_random(random_n, seed, spec, max_workers, max_point_s, models, iterations, out, lock, list_only, record,
                explain, strategies)


def _run_random(n: int, seed: int, spec: str, max_workers: int, max_point_s: float, models: Optional[str],
                iterations: int, out: Optional[Path], lock: Optional[str], list_only: bool,
                record: Optional[str], explain: bool, strategies: Optional[str] = None) -> None:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    from synclab.compute.profile import ModelProfileError
    from synclab.validate import random_points as rp
    from synclab.validate.grid import write_results

    root, base = _checkout_and_spec(record, spec)
    try:
        draw = rp.draw_points(n, seed, models=tuple(_csv(models, "--models")) if models else rp.MODELS,
                              names=_csv(strategies, "--strategies") if strategies else None,
                              max_workers=max_workers, max_point_s=max_point_s, iterations=iterations)
    except (ValueError, ModelProfileError) as e:
        fail(str(e))
    out = out or Path("runs") / f"validate-random-s{seed}"
    console.print(f"{n} point(s) drawn with seed {seed} ({draw.redrawn} drawn again for an estimate over "
                  f"{max_point_s:g} host s) -> {out}")
    if list_only:
        t = Table(title=f"random points, seed {seed}")
        for c in ("#", "strategy", "workers", "shards", "rate", "delay", "model", "batch", "scale", "D", "est. s"):
            t.add_column(c, justify="right")
        for p in draw.points:
            t.add_row(str(p.index), p.strategy, str(p.workers), str(p.shards or "—"), p.rate, f"{p.delay_us} us",
                      p.model, str(p.batch), f"{p.scale:g}", str(p.dilation), f"{p.estimated_s:.0f}")
        Console(width=None if sys.stdout.isatty() else 150).print(t)
        return
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task("random points", total=len(draw.points))

        def on_point(i, p):
            progress.update(task, completed=i, description=f"{p.name} (D = {p.dilation}, est. {p.estimated_s:.0f} s)")

        rows = rp.run_points(base, draw, out, lock=lock, iterations=iterations, on_point=on_point)
        progress.update(task, completed=len(draw.points), description="random points")
    write_results(out, rows, rp.COLUMNS, log=True)
    t = Table(title="simulated (defaults) ÷ emulated (its own D) mean iteration time")
    for c in ("#", "strategy", "workers", "shards", "rate", "model", "D", "emulated s", "simulated s", "sim ÷ emu"):
        t.add_column(c, justify="right")
    for r in rows:
        cells = [str(r["index"]), r["strategy"], str(r["workers"]), str(r["shards"] or "—"), r["rate"], r["model"],
                 str(r.get("dilation", "?"))]
        if "ratio" in r:
            t.add_row(*cells, f"{r['emulated_s']:.3f}", f"{r['simulated_s']:.3f}", f"{r['ratio']:.3f}")
        else:
            t.add_row(*cells, "—", "—", r.get("error", "—")[:60])
    Console(width=None if sys.stdout.isatty() else 150).print(t)
    c = rp.counts(rows)
    console.print(f"{c['within_10']} of {c['compared']} compared points within ±10 %, {c['beyond_20']} beyond "
                  f"±20 %, {c['failed']} failed; wrote {out}/sim-vs-emu.csv, .json, .png")
    if explain:
        _explain(base, draw, out, rows, iterations)
    if record:
        from synclab.validate.grid import record as keep

        extra = {"random": {"n": n, "seed": seed, "redrawn": draw.redrawn, "bounds": draw.bounds}}
        dest = keep(out, record, "synclab validate " + shlex.join(sys.argv[2:]), root, extra)
        console.print(f"recorded in {dest} (`synclab validate doc` writes docs/results/validation.md)")
    if c["failed"]:
        raise typer.Exit(1)


def _explain(base: Path, draw, out: Path, rows: list[dict], iterations: int) -> None:
    """``--explain``: the points beyond ±10 % simulated again, one emulator artifact at a time; explain.csv."""
    import csv
    import io

    from rich.table import Table

    from synclab.fileio import write_atomic
    from synclab.validate import random_points as rp

    with console.status("simulating the points beyond ±10 % again, one emulator artifact at a time"):
        got = rp.explain(base, draw, out, rows, iterations=iterations)
    text = io.StringIO()
    w = csv.DictWriter(text, fieldnames=rp.EXPLAIN_COLUMNS, extrasaction="ignore")
    w.writeheader()
    w.writerows(got)
    write_atomic(out / "explain.csv", text.getvalue())
    t = Table(title="points beyond ±10 %: simulated ÷ emulated with one emulator artifact modelled")
    for c in ("#", "strategy", "D", "defaults", *(tag for tag, _, _ in rp.EXPLANATIONS)):
        t.add_column(c, justify="right")
    for r in got:
        t.add_row(str(r["index"]), r["strategy"], str(r["dilation"]), f"{float(r['ratio']):.3f}",
                  *(f"{r[f'{tag}_ratio']:.3f}" if r.get(f"{tag}_ratio") is not None else "—"
                    for tag, _, _ in rp.EXPLANATIONS))
    Console(width=None if sys.stdout.isatty() else 150).print(t)
    console.print(f"wrote {out}/explain.csv")


def _checkout_and_spec(record: Optional[str], spec: str) -> tuple[Optional[Path], Path]:
    """The checkout ``--record`` writes into (None without it) and the base spec's file; exit 2 naming a problem."""
    from synclab.resources import checkout, spec_path

    root = checkout() if record else None
    if record and root is None:
        fail("--record writes docs/validation/NAME/ of a checkout: run it inside one")
    base = spec_path(spec)
    if not base.is_file():
        fail(f"spec {spec!r} is neither a file nor a packaged example (synclab examples)")
    return root, base


def _csv(text: str, what: str) -> list[str]:
    items = [x.strip() for x in text.split(",") if x.strip()]
    if not items:
        fail(f"{what} needs at least one value, got {text!r}")
    return items


@app.command("grid")
def grid(spec: str = typer.Option("quickstart", "--spec", help="Base spec: a YAML file or a packaged example."),
         strategies: str = typer.Option("wfbp,ps", "--strategies", help="Comma-separated strategy names."),
         rates: str = typer.Option("1gbit", "--rates", help="Comma-separated link rates (network.rate)."),
         workers: str = typer.Option("2,4", "--workers", help="Comma-separated worker counts."),
         models: str = typer.Option("resnet50", "--models", help="Comma-separated models (replayed)."),
         scale: float = typer.Option(0.01, "--scale", help="compute.scale of the replayed profiles."),
         iterations: int = typer.Option(8, "--iterations", min=3, help="run.iterations of every point (2 warm-up)."),
         dilation: str = typer.Option("8", "--dilation", help="run.dilation of emulated points at >= 4 Gbit/s, "
                                      "or 'rule': every point's D from the reproduction runner's host-capacity "
                                      "rule (nodes x rate / D <= 1.5 Gbit/s)."),
         dilation_times: int = typer.Option(1, "--dilation-times", min=1, help="Run every point at K times its "
                                            "dilation: where the host is the bottleneck a larger D makes the "
                                            "emulator faster; where it is not, the emulated times do not move."),
         set_: list[str] = typer.Option([], "--set", help="Extra spec override KEY=VALUE for every point."),
         out: Path = typer.Option(Path("runs/sim-vs-emu"), "--out", help="Run directory; points already there "
                                  "are reused."),
         lock: Optional[str] = typer.Option(None, "--lock", help="flock this file around each emulated point "
                                            "(a host shared by several jobs)."),
         sim_arg: list[str] = typer.Option([], "--sim-arg", help="An argument for `synclab simulate` only "
                                           "(e.g. --sim-arg=--host-cpu --sim-arg=2)."),
         resim: bool = typer.Option(False, "--resim", help="Simulate every point again (emulated ones are reused)."),
         emu_only: bool = typer.Option(False, "--emu-only", help="Run the emulated points only."),
         sim_only: bool = typer.Option(False, "--sim-only", help="Simulate the points already emulated; skip "
                                       "the rest."),
         record: Optional[str] = typer.Option(None, "--record", metavar="NAME", help="Also copy the results into "
                                              "docs/validation/NAME/ of this checkout (what `synclab validate "
                                              "doc` reads).")):
    """Run every point of the grid on the emulator and the simulator; simulated / emulated mean iteration."""
    from rich.progress import track
    from rich.table import Table

    from synclab.validate.grid import grid_points, run_grid, write_results

    if emu_only and sim_only:
        fail("--emu-only and --sim-only exclude each other")
    root, base = _checkout_and_spec(record, spec)
    try:
        n_workers = [int(w) for w in _csv(workers, "--workers")]
    except ValueError:
        fail(f"--workers must be comma-separated integers, got {workers!r}")
    points = grid_points(_csv(strategies, "--strategies"), _csv(rates, "--rates"), n_workers,
                         _csv(models, "--models"), scale=scale, iterations=iterations, sets=list(set_))
    try:
        rows = run_grid(base, points, out, dilation=dilation, dilation_times=dilation_times, lock=lock,
                        sim_args=list(sim_arg), resim=resim, emu_only=emu_only, sim_only=sim_only,
                        progress=lambda p: track(p, description="sim vs emu", console=console))
    except ValueError as e:
        fail(str(e))
    write_results(out, rows)
    t = Table(title="simulated ÷ emulated mean iteration time")
    for c in ("strategy", "rate", "workers", "model", "emulated s", "simulated s", "sim ÷ emu", "±10 %"):
        t.add_column(c, justify="right")
    for r in rows:
        cells = [r["strategy"], r["rate"], str(r["workers"]), r["model"]]
        if "ratio" in r:
            t.add_row(*cells, f"{r['emulated_s']:.3f}", f"{r['simulated_s']:.3f}", f"{r['ratio']:.3f}",
                      "yes" if r["within_10pct"] else "NO")
        else:
            t.add_row(*cells, "—", "—", "—", r.get("error", "emulated only")[:60])
    Console(width=None if sys.stdout.isatty() else 150).print(t)
    console.print(f"wrote {out}/sim-vs-emu.csv, .json, .png")
    if record:
        from synclab.validate.grid import record as keep

        dest = keep(out, record, "synclab validate grid " + shlex.join(sys.argv[3:]), root)
        console.print(f"recorded in {dest} (`synclab validate doc` writes docs/results/validation.md)")
    if any("error" in r for r in rows):
        raise typer.Exit(1)


@app.command("doc")
def doc():
    """Regenerate docs/results/validation.md (and docs/validation/grid.png, the README's grid block) from the
    checked-in records under docs/validation/."""
    from synclab.resources import checkout
    from synclab.validate.doc import ValidationDocError, write

    root = checkout()
    if root is None:
        fail("the validation page belongs to a checkout: run `synclab validate doc` inside one")
    try:
        for p in write(root):
            console.print(f"wrote {p.relative_to(root)}")
    except ValidationDocError as e:
        fail(str(e))


@app.command("compare")
def compare(before: list[Path] = typer.Option(..., "--before", help="sim-vs-emu.csv of the first validation "
                                              "(repeatable)."),
            after: list[Path] = typer.Option(..., "--after", help="sim-vs-emu.csv of the second (repeatable)."),
            labels: str = typer.Option("before,after", "--labels", help="The two series' names, comma-separated."),
            title: str = typer.Option("simulated ÷ emulated mean iteration", "--title"),
            out: Path = typer.Option(..., "--out", help="The figure (PNG) to write.")):
    """Two validations of the same points side by side: a table (markdown) and a figure per strategy and rate."""
    from synclab.validate.compare import plot, read, table

    for p in [*before, *after]:
        if not p.is_file():
            fail(f"{p}: no such file")
    names = labels.split(",")
    if len(names) != 2:
        fail(f"--labels needs two names, got {labels!r}")
    try:
        b, a = read(before), read(after)
    except ValueError as e:  # synclab.fileio.InputFileError: the file and what is wrong with it
        fail(str(e))
    if not set(b) & set(a):
        fail("no point is in both --before and --after")
    typer.echo("\n".join(table(b, a, (names[0], names[1]))))
    plot(b, a, (names[0], names[1]), title, out)
    console.print(f"wrote {out}")
