"""A tuning job: the simulator as the objective, the emulator (``synclab run``) as the confirmation.

Each trial loads the spec with the trial's values as ``--set`` overrides and simulates it in-process
(:func:`synclab.sim.run.simulate`, without per-tensor events); the objective is the steady-state mean
iteration time (``summary.json`` ``iteration_seconds.mean``: the iterations after ``run.warmup``) or, with
``metric="throughput"``, samples per second (maximised). The spec as given is simulated first, as the
``default`` point the gains are measured against. The ``confirm`` best distinct points (and the default)
are then run for real: ``synclab run`` in a child process (which takes the host's emulation lock, :mod:`synclab.hostlock`), ``confirm_iterations`` iterations each, their ``summary.json`` read back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from synclab.tune.search import best, search
from synclab.tune.space import Param

METRICS = ("iteration", "throughput")


def objective_of(summary: dict[str, Any], metric: str) -> float:
    """The number minimised: mean steady-state iteration seconds, or minus samples per second."""
    if metric == "iteration":
        return float(summary["iteration_seconds"]["mean"])
    if metric == "throughput":
        return -float(summary["throughput_samples_per_s"])
    raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")


def overrides_of(values: dict[str, int | float]) -> list[str]:
    return [f"{k}={v!r}" if isinstance(v, float) else f"{k}={v}" for k, v in values.items()]


def simulate_point(spec_file: Path, base: list[str], values: dict[str, int | float]) -> dict[str, Any]:
    """The simulated summary of the spec with ``base`` and ``values`` as overrides (a bad combination raises
    :class:`~synclab.config.SpecError`, a ValueError)."""
    from synclab.sim.records import summary_of
    from synclab.sim.run import load_for_simulation, simulate

    spec, workers = load_for_simulation(spec_file, [*base, *overrides_of(values)])
    return summary_of(simulate(spec, workers=workers, record_events=False))


def emulate_point(spec_file: Path, base: list[str], values: dict[str, int | float], out: Path, *,
                  iterations: int, timeout_s: float = 1800) -> dict[str, Any]:
    """Run the point with ``synclab run`` (a child process, under the emulation lock) for ``iterations``
    iterations (warm-up at most half of them) and return its ``summary.json``; RuntimeError when the run
    fails (its last output lines in the message)."""
    from synclab.config import load_spec

    warmup = min(load_spec(spec_file, base).run.warmup, iterations // 2)
    sets = [*base, *overrides_of(values), f"run.iterations={iterations}", f"run.warmup={warmup}"]
    cmd = [sys.executable, "-m", "synclab", "run", str(spec_file), "--out", str(out),
           "--no-report", *[a for s in sets for a in ("--set", s)]]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, env=os.environ.copy())
    summary = out / "summary.json"
    if proc.returncode != 0 or not summary.exists():
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-6:])
        raise RuntimeError(f"synclab run of {values} failed (exit {proc.returncode}):\n{tail}")
    return json.loads(summary.read_text())


@dataclass
class TuneResult:
    spec: str
    params: list[Param]
    metric: str
    seed: int
    overrides: list[str]
    default: dict[str, Any]
    trials: list[dict[str, Any]]
    confirmed: list[dict[str, Any]] = field(default_factory=list)
    wall_s: float = 0.0

    def best(self) -> dict[str, Any] | None:
        found = best(self.trials, 1)
        return found[0] if found else None

    def as_dict(self) -> dict[str, Any]:
        b = self.best()
        d = self.default["value"]
        gain = None if b is None or d is None else _gain(d, b["value"], self.metric)
        return {"spec": self.spec, "metric": self.metric,
                "objective": ("mean steady-state iteration seconds (minimised)" if self.metric == "iteration"
                              else "minus samples per second (minimised)"),
                "seed": self.seed, "overrides": self.overrides, "params": [p.as_dict() for p in self.params],
                "default": self.default, "trials": self.trials, "best": b,
                "simulated_gain": gain, "confirmed": self.confirmed, "wall_seconds": self.wall_s}


def _gain(default: float, tuned: float, metric: str) -> float:
    """How much faster the tuned point is than the default: default time / tuned time - 1 (for throughput,
    the objective is minus samples/s: tuned/default - 1 of the rates, the same thing)."""
    return default / tuned - 1 if metric == "iteration" else tuned / default - 1


def tune(spec_file: Path, params: list[Param], *, trials: int, confirm: int = 1, confirm_iterations: int = 6,
         metric: str = "iteration", seed: int = 0, overrides: list[str] | None = None, out: Path,
         simulate_fn: Callable[[dict], dict] | None = None, emulate_fn: Callable[[dict, Path], dict] | None = None,
         on_trial: Callable[[dict[str, Any]], None] | None = None,
         on_confirm: Callable[[dict[str, Any]], None] | None = None) -> TuneResult:
    """Search, confirm, and write ``out/tune.json`` and ``out/tune.png``; returns the result.

    ``simulate_fn(values) -> summary`` and ``emulate_fn(values, run_dir) -> summary`` default to
    :func:`simulate_point` and :func:`emulate_point` of ``spec_file`` (tests pass cheap ones)."""
    if metric not in METRICS:
        raise ValueError(f"metric must be one of {METRICS}, got {metric!r}")
    base = list(overrides or [])
    sim = simulate_fn or (lambda values: simulate_point(spec_file, base, values))
    emu = emulate_fn or (lambda values, d: emulate_point(spec_file, base, values, d, iterations=confirm_iterations))
    t0 = time.perf_counter()
    default = {"params": {}, "value": objective_of(sim({}), metric)}
    result = TuneResult(str(spec_file), params, metric, seed, base, default,
                        search(lambda v: objective_of(sim(v), metric), params, trials, seed=seed, on_trial=on_trial))
    if confirm > 0:
        points = [("default", {})] + [(f"trial{t['number']}", t["params"]) for t in best(result.trials, confirm)]
        for name, values in points:
            record: dict[str, Any] = {"name": name, "params": values, "run_dir": str(out / "emulated" / name),
                                      "iterations": confirm_iterations}
            try:
                s = emu(values, out / "emulated" / name)
                record.update(value=objective_of(s, metric), status="ok")
            except (RuntimeError, subprocess.TimeoutExpired, OSError) as e:
                record.update(value=None, status="failed", error=str(e))
            sim_value = default["value"] if name == "default" else next(
                t["value"] for t in result.trials if t["params"] == values)
            record["simulated_value"] = sim_value
            result.confirmed.append(record)
            if on_confirm is not None:
                on_confirm(record)
        emu_default = result.confirmed[0]["value"]
        for r in result.confirmed[1:]:
            r["emulated_gain"] = (None if emu_default is None or r["value"] is None
                                  else _gain(emu_default, r["value"], metric))
    result.wall_s = time.perf_counter() - t0
    write(result, out)
    return result


def write(result: TuneResult, out: Path) -> tuple[Path, Path]:
    """``tune.json`` (written to a temporary name, then renamed) and ``tune.png``."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / "tune.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(result.as_dict(), indent=2, default=str) + "\n")
    tmp.replace(path)
    return path, plot(result, out / "tune.png")


def plot(result: TuneResult, path: Path) -> Path:
    """The objective against each parameter: simulated trials, the simulated default (a line), emulated
    confirmations (red)."""
    from matplotlib.figure import Figure

    n = len(result.params)
    fig = Figure(figsize=(4.2 * n, 3.6))
    scale, unit = (1e3, "mean iteration time (ms)") if result.metric == "iteration" else (-1.0, "samples/s")
    done = [t for t in result.trials if t["value"] is not None]
    for k, p in enumerate(result.params):
        ax = fig.add_subplot(1, n, k + 1)
        ax.scatter([t["params"][p.key] for t in done], [t["value"] * scale for t in done], s=14, alpha=0.7,
                   label="simulated trials")
        if result.default["value"] is not None:
            ax.axhline(result.default["value"] * scale, color="grey", ls="--", lw=1, label="spec as given (sim)")
        emu = [c for c in result.confirmed if c.get("value") is not None and p.key in c["params"]]
        if emu:
            ax.scatter([c["params"][p.key] for c in emu], [c["value"] * scale for c in emu], color="red",
                       marker="x", s=40, label="emulated")
        emu_default = [c for c in result.confirmed if c["name"] == "default" and c.get("value") is not None]
        if emu_default:
            ax.axhline(emu_default[0]["value"] * scale, color="red", ls=":", lw=1, label="spec as given (emu)")
        if p.log:
            ax.set_xscale("log")
        ax.set_xlabel(p.key)
        ax.set_ylabel(unit)
        ax.grid(alpha=0.3)
        if k == 0:
            ax.legend(fontsize=7)
    fig.suptitle(f"synclab tune {Path(result.spec).name}: {len(result.trials)} trials", fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path
