"""The simulator against the emulator on points drawn at random (``synclab validate --random N --seed S``;
issue 52 item 3).

The grid (:mod:`synclab.validate.grid`) measures points someone chose, with the simulator told about the
emulator's host. Here the points are drawn by a seeded generator — strategy (every registered one with a
simulator model but ``local``), workers, PS shards, link rate, one-way delay, replayed model and compute scale —
and each is compared the way a user would meet it: the emulator (``synclab run``) at the dilation D its own
rule picks (:func:`synclab.config.dilation.choose_dilation`: nothing passes ``run.dilation``) against
``synclab simulate`` with its defaults (no host-modelling flag: a cluster whose nodes have their own CPUs and
NICs).

What one 2-core host can emulate bounds the draw, and the bounds are part of the record:

- workers up to ``max_workers`` (8 by default: the grid's 16-worker points took 5-13 minutes of host time each,
  its 8-worker points 1-5);
- a drawn point whose estimated host time (:func:`estimate_host_s`) exceeds ``max_point_s`` is drawn again,
  and the record counts those redraws, so the sample is "random among the points this host runs in that time".

:func:`draw_points` is pure and deterministic for a seed (the same seed gives the same points in the same order
with the same registry and profiles); :func:`run_points` runs or reuses them under ``out/<point>/`` so the
command resumes from its records and can run in pieces.
"""

from __future__ import annotations

import math
import random
from dataclasses import asdict, dataclass
from pathlib import Path

# Replayed models a point may draw (each has a checked-in profile): from ResNet-20's 0.27 M parameters to
# VGG-16's 138 M, CNNs of the four papers.
MODELS = ("resnet20", "googlenet", "inception_v3", "resnet50", "alexnet", "vgg16")
MIN_WORKERS, MAX_WORKERS = 2, 8
MAX_SHARDS = 4
RATE_BPS = (1e9, 10e9)          # drawn log-uniformly, to 100 Mbit/s
DELAY_S = (0.0, 1e-3)           # one-way, drawn uniformly, to 10 us
SCALE = (0.005, 0.03)           # compute.scale of the CPU profiles, log-uniformly (0.01: about a V100)
ITERATIONS, WARMUP = 8, 2
MAX_POINT_S = 180.0             # a point's estimated host time above this is drawn again
STARTUP_S = 30.0                # the launch and the end of a local run, host seconds (the grid's records)
MAX_REDRAWS = 1000


@dataclass(frozen=True)
class RandomPoint:
    """One drawn point: its coordinates and what it is estimated to cost the host."""

    index: int
    strategy: str
    workers: int
    shards: int          # PS shards; 0 for a strategy without a PS
    rate_mbit: int
    delay_us: int
    model: str
    batch: int
    scale: float
    dilation: int        # the emulator's D by the run's own rule
    estimated_s: float   # host seconds, :func:`estimate_host_s`

    @property
    def name(self) -> str:
        ps = f"-{self.shards}s" if self.shards else ""
        return f"{self.index:02d}-{self.strategy}-{self.workers}w{ps}-{self.rate_mbit}mbit-{self.model}"

    @property
    def rate(self) -> str:
        return f"{self.rate_mbit}mbit"

    def overrides(self, iterations: int = ITERATIONS, warmup: int = WARMUP) -> list[str]:
        """The spec overrides that make this point (no ``run.dilation``: the run chooses its own)."""
        from synclab.strategies import registry

        sets = [f"strategy.name={self.strategy}", f"cluster.workers={self.workers}", f"network.rate={self.rate}",
                f"network.delay={self.delay_us}us", f"model.name={self.model}", f"model.batch_size={self.batch}",
                "compute.mode=replay", f"compute.scale={self.scale}", f"run.iterations={iterations}",
                f"run.warmup={warmup}", *registry.get(self.strategy).short_run]
        if self.shards:
            sets.append(f"cluster.ps_shards={self.shards}")
        return sets

    def coords(self) -> dict:
        return {k: v for k, v in asdict(self).items() if k != "estimated_s"} | {"rate": self.rate,
                                                                                 "name": self.name}


def strategies() -> list[str]:
    """The strategies a point may draw: every registered one with a simulator model, but ``local`` (nothing to
    synchronize), sorted by name so a seed draws the same points whatever order the registry found them in."""
    from synclab.strategies import registry

    return sorted(n for n in registry.names() if n != "local" and registry.get(n).sim_model is not None)


@dataclass(frozen=True)
class ModelCost:
    """What the estimate needs of a replayed model: its gradient bytes and one iteration's compute at scale 1."""

    batch: int
    grad_bytes: int
    compute_s: float


def model_cost(model: str) -> ModelCost:
    """From the profile replay uses for ``model`` at the paper's batch size."""
    import json

    from synclab.compute.profile import PAPER_BATCH, find_default_profile

    path, _ = find_default_profile(model, PAPER_BATCH.get(model))
    p = json.loads(path.read_text())
    params = sum(int(t["params"]) for t in p["tensors"])
    return ModelCost(int(p["batch_size"]), 4 * params, float(p["forward_seconds"]) + float(p["backward_seconds"]))


def busiest_link_bytes(grad_bytes: int, workers: int, shards: int) -> float:
    """Bytes one direction of the busiest link carries per iteration: a PS shard's N·M/S (every worker's part
    in, every worker's fresh part out; a worker's own M where that is more), else a ring all-reduce's
    2(N-1)/N·M per worker (MG-WFBP eq. 2's bandwidth term)."""
    if shards:
        return grad_bytes * max(1.0, workers / shards)
    return 2 * (workers - 1) / workers * grad_bytes


def estimate_host_s(cost: ModelCost, workers: int, shards: int, rate_bps: float, scale: float, dilation: int,
                    iterations: int = ITERATIONS) -> float:
    """Host seconds of an emulated point, no overlap assumed: every iteration computes and then moves its busiest
    link's bytes at the link rate, D times slower on the host clock, plus :data:`STARTUP_S`. Against the grid's
    records it lands within about 25 % (e.g. PS, 16 workers, 2 shards, ResNet-50, 4 Gbit/s, D = 64: 819 s
    estimated, 799 s measured)."""
    per_iteration = cost.compute_s * scale + 8 * busiest_link_bytes(cost.grad_bytes, workers, shards) / rate_bps
    return STARTUP_S + iterations * dilation * per_iteration


def rule_dilation(workers: int, shards: int, rate_bps: float) -> int:
    """The D ``synclab run`` picks for a replayed point (:func:`synclab.config.dilation.dilation_for` of every
    link-owning node at the link rate; shards are not co-located here)."""
    from synclab.config.dilation import dilation_for

    return dilation_for((workers + shards) * rate_bps)


@dataclass(frozen=True)
class Draw:
    points: list[RandomPoint]
    redrawn: int           # points drawn again for exceeding max_point_s
    bounds: dict           # the ranges drawn from, for the record


def draw_points(n: int, seed: int, *, names: list[str] | None = None, models: tuple[str, ...] = MODELS,
                max_workers: int = MAX_WORKERS, max_point_s: float = MAX_POINT_S,
                iterations: int = ITERATIONS) -> Draw:
    """``n`` points drawn by ``random.Random(seed)``: strategy and model uniformly, workers uniformly in
    [2, max_workers], shards (PS strategies) uniformly in [1, min(workers, 4)], the rate log-uniformly in
    1-10 Gbit/s, the delay uniformly in 0-1 ms, the compute scale log-uniformly in 0.005-0.03; a point estimated
    above ``max_point_s`` host seconds is drawn again (counted). ValueError for bad bounds."""
    from synclab.strategies import registry

    if n < 1:
        raise ValueError(f"the number of points must be at least 1, got {n}")
    if not MIN_WORKERS <= max_workers <= 1024:
        raise ValueError(f"max workers must be in [{MIN_WORKERS}, 1024], got {max_workers}")
    if max_point_s <= STARTUP_S:
        raise ValueError(f"the point budget must exceed the {STARTUP_S:g} s a run takes to start, got {max_point_s}")
    known = strategies()
    if names is not None:
        unknown = sorted(set(names) - set(known))
        if unknown:
            raise ValueError(f"strategies {', '.join(unknown)} cannot be drawn (one of {', '.join(known)}: "
                             "registered, with a simulator model, not local)")
    names = sorted(set(names)) if names is not None else known
    if not names or not models:
        raise ValueError("no strategy or no model to draw from")
    costs = {m: model_cost(m) for m in models}
    rng = random.Random(seed)
    points, redrawn = [], 0
    while len(points) < n:
        strategy = rng.choice(names)
        model = rng.choice(models)
        workers = rng.randint(MIN_WORKERS, max_workers)
        shards = rng.randint(1, min(workers, MAX_SHARDS)) if registry.get(strategy).needs_ps else 0
        rate_mbit = int(round(math.exp(rng.uniform(*map(math.log, RATE_BPS))) / 1e8)) * 100
        delay_us = int(round(rng.uniform(*DELAY_S) * 1e5)) * 10
        scale = round(math.exp(rng.uniform(*map(math.log, SCALE))), 4)
        d = rule_dilation(workers, shards, rate_mbit * 1e6)
        cost = costs[model]
        est = estimate_host_s(cost, workers, shards, rate_mbit * 1e6, scale, d, iterations)
        if est > max_point_s:
            redrawn += 1
            if redrawn > MAX_REDRAWS:
                raise ValueError(f"{MAX_REDRAWS} draws in a row exceed {max_point_s:g} host seconds: raise the "
                                 "point budget or draw smaller models")
            continue
        points.append(RandomPoint(len(points) + 1, strategy, workers, shards, rate_mbit, delay_us, model,
                                  cost.batch, scale, d, round(est, 1)))
    bounds = {"strategies": names, "models": list(models), "workers": [MIN_WORKERS, max_workers],
              "shards": [1, MAX_SHARDS], "rate_gbit": [RATE_BPS[0] / 1e9, RATE_BPS[1] / 1e9],
              "delay_ms": [DELAY_S[0] * 1e3, DELAY_S[1] * 1e3], "scale": list(SCALE), "max_point_s": max_point_s,
              "iterations": iterations, "warmup": WARMUP}
    return Draw(points, redrawn, bounds)


COLUMNS = ["index", "name", "strategy", "workers", "shards", "rate", "delay_us", "model", "batch", "scale",
           "dilation", "estimated_s", "emulated_s", "simulated_s", "ratio", "within_10pct", "pace", "backend",
           "emu_started", "emu_wall_s", "emu_load_end", "emu_host_busy", "error"]


def run_points(spec: Path, draw: Draw, out: Path, *, lock: str | None = None, iterations: int = ITERATIONS,
               on_point=None) -> list[dict]:
    """Run (or reuse, where ``out/<point>/`` holds its summaries) every drawn point: the emulator at its own D, the
    simulator with its defaults. One row per point (``error`` for a point that failed: it runs again next time).
    ``on_point(i, point)`` is called before each."""
    from synclab.validate.grid import point as run_point

    rows = []
    for i, p in enumerate(draw.points):
        if on_point:
            on_point(i, p)
        row = p.coords() | {"estimated_s": p.estimated_s}
        try:
            got = run_point(spec, out / p.name, p.overrides(iterations), None, lock=lock)
        except RuntimeError as e:
            row["error"] = str(e)
        else:
            row.update(got)
        rows.append(row)
    return rows


def counts(rows: list[dict]) -> dict:
    """Points compared, within +-10 %, beyond +-20 %, failed."""
    ratios = [float(r["ratio"]) for r in rows if r.get("ratio") not in (None, "")]
    return {"points": len(rows), "compared": len(ratios), "within_10": sum(abs(v - 1) <= 0.10 for v in ratios),
            "beyond_20": sum(abs(v - 1) > 0.20 for v in ratios), "failed": len(rows) - len(ratios)}


# What a point beyond +-10 % is simulated again with, one emulator artifact at a time (``--explain``): the tag,
# what it models, and the `synclab simulate` arguments (D: the dilation the emulated point ran at).
EXPLANATIONS = (
    ("startup_over_d", "the per-message start-up of the emulator at its D (the default's a / D: the host's "
                       "start-up is paid on the host clock, D times slower than the emulated one)",
     lambda d: ["--startup", repr(_default_startup_s() / d)]),
    ("host", "the emulator's host: 2 shared cores and the tbf buckets of its shaped links (--host-cpu 2)",
     lambda d: ["--host-cpu", "2", "--set", f"run.dilation={d}"]),
    ("host_no_bucket", "the same host without the tbf buckets' burst (--host-cpu 2 --no-tbf-bucket)",
     lambda d: ["--host-cpu", "2", "--no-tbf-bucket", "--set", f"run.dilation={d}"]),
)
def _default_startup_s() -> float:
    from synclab.sim.run import DEFAULT_STARTUP_S

    return DEFAULT_STARTUP_S


EXPLAIN_COLUMNS = ["index", "name", "strategy", "dilation", "ratio", *(f"{t}_ratio" for t, _, _ in EXPLANATIONS),
                   "error"]


def explain_point(spec: Path, out: Path, sets: list[str], row: dict) -> dict:
    """Simulate a compared point again with each of :data:`EXPLANATIONS` (each reused where its summary exists
    under ``out/explain-<tag>/``); simulated / emulated of each. The artifact whose model brings the ratio to
    1 is the measured effect that separates the emulator from the simulator's defaults there."""
    import sys

    from synclab.validate.grid import _summary, iteration_mean

    d = row["dilation"]
    got = {k: row.get(k) for k in ("index", "name", "strategy", "dilation", "ratio")}
    for tag, _, args in EXPLANATIONS:
        o = out / f"explain-{tag}"
        cmd = [sys.executable, "-m", "synclab", "simulate", str(spec), "--out", str(o), *args(d)]
        for s in sets:
            cmd += ["--set", s]
        try:
            mean, _ = iteration_mean(o, _summary(o, cmd))
        except RuntimeError as e:
            got["error"] = f"{tag}: {e}"
            continue
        got[f"{tag}_ratio"] = mean / float(row["emulated_s"])
    return got


def explain(spec: Path, draw: Draw, out: Path, rows: list[dict], *, tol: float = 0.10,
            iterations: int = ITERATIONS) -> list[dict]:
    """:func:`explain_point` of every compared point beyond ``tol``."""
    by = {p.name: p for p in draw.points}
    return [explain_point(spec, out / r["name"], by[r["name"]].overrides(iterations), r) for r in rows
            if r.get("ratio") not in (None, "") and abs(float(r["ratio"]) - 1) > tol]
