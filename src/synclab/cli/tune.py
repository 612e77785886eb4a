"""``synclab tune``: search numeric spec keys on the simulator, confirm the best on the emulator
(:mod:`synclab.tune`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from synclab.cli._common import console, fail


def tune(spec: Path = typer.Argument(..., help="Experiment spec (YAML) or a packaged example by name."),
         param: list[str] = typer.Option(..., "--param", help="KEY=LOW:HIGH[:log]: a numeric spec key to search "
                                         "(repeatable), e.g. strategy.slice_params=10000:1000000:log."),
         trials: int = typer.Option(20, "--trials", min=1, help="Simulated trials."),
         confirm: int = typer.Option(1, "--confirm", min=0, help="Best distinct points to run on the emulator "
                                     "(synclab run, which takes the host emulation lock), with the spec as given; "
                                     "0: simulate only."),
         confirm_iterations: int = typer.Option(6, "--confirm-iterations", min=2, help="Iterations of each "
                                                "emulated confirmation."),
         metric: str = typer.Option("iteration", "--metric", help="iteration (mean steady-state iteration time, "
                                    "minimised) or throughput (samples/s, maximised)."),
         seed: int = typer.Option(0, "--seed", help="Seeds the sampler (the same seed repeats the search)."),
         set_: list[str] = typer.Option([], "--set", help="Override a spec key for every point: dotted.key=value."),
         out: Optional[Path] = typer.Option(None, "--out", help="Output directory (default runs/<time>-tune)."),
         as_json: bool = typer.Option(False, "--json", help="Print tune.json to stdout.")):
    """Bayesian search (Optuna TPE) of numeric spec keys on the simulator; writes tune.json and tune.png."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.config import SpecError
    from synclab.resources import spec_path
    from synclab.sim.run import load_for_simulation, model_of
    from synclab.tune import TuneError, resolve_params
    from synclab.tune.job import METRICS
    from synclab.tune.job import tune as run_tune

    if metric not in METRICS:
        fail(f"--metric must be one of {', '.join(METRICS)}, got {metric!r}")
    path = spec_path(spec)
    try:
        s, _ = load_for_simulation(path, list(set_))
        params = resolve_params(s, list(param))
        model_of(s.strategy.name)  # a strategy without a simulator model stops here, before any trial
    except TuneError as e:
        fail(str(e))
    except SpecError as e:
        fail(f"invalid spec: {e}")
    out = out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-tune-{s.strategy.name}"
    scale = 1e3 if metric == "iteration" else -1.0
    unit = "ms" if metric == "iteration" else "samples/s"
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TextColumn("{task.fields[best]}"), console=console) as progress:
        task = progress.add_task("simulated trials", total=trials, best="")
        emu = progress.add_task("emulated", total=confirm + 1 if confirm else 0, best="", visible=bool(confirm))
        state = {"best": None}

        def on_trial(t: dict) -> None:
            if t["value"] is not None and (state["best"] is None or t["value"] < state["best"]):
                state["best"] = t["value"]
            shown = "" if state["best"] is None else f"best {state['best'] * scale:.2f} {unit}"
            progress.update(task, advance=1, best=shown)

        def on_confirm(c: dict) -> None:
            v = c.get("value")
            progress.update(emu, advance=1, best=f"{c['name']}: " + ("failed" if v is None else
                                                                       f"{v * scale:.2f} {unit}"))

        try:
            result = run_tune(path, params, trials=trials, confirm=confirm, confirm_iterations=confirm_iterations,
                              metric=metric, seed=seed, overrides=list(set_), out=out, on_trial=on_trial,
                              on_confirm=on_confirm)
        except SpecError as e:
            fail(f"invalid spec: {e}")
    d = result.as_dict()
    if as_json:
        typer.echo(json.dumps(d, indent=2, default=str))
    b = d["best"]
    if b is None:
        fail(f"every trial failed (first error: {result.trials[0]['error']}); see {out / 'tune.json'}", 1)
    console.print(f"spec as given: {d['default']['value'] * scale:.2f} {unit} (simulated)")
    console.print(f"best: trial {b['number']} {b['params']}: {b['value'] * scale:.2f} {unit} (simulated, "
                  f"{d['simulated_gain'] * 100:+.1f} %)")
    for c in d["confirmed"]:
        v = c.get("value")
        gain = c.get("emulated_gain")
        console.print(f"emulated {c['name']} {c['params']}: " + (f"failed: {c.get('error')}" if v is None else
                      f"{v * scale:.2f} {unit}" + ("" if gain is None else f" ({gain * 100:+.1f} %)")))
    console.print(f"-> {out / 'tune.json'}, {out / 'tune.png'}")
    if any(c.get("value") is None for c in d["confirmed"]):
        raise typer.Exit(1)
