"""``synclab plan``: merge plans and predicted iteration times from a model profile, without a cluster.

``synclab plan mgwfbp`` reads a model profile with
:func:`synclab.compute.profile.load_model_profile` (every field of the format
checked; the plan uses ``forward_seconds`` and, per tensor in forward order,
``params`` and ``backward_seconds``), takes the all-reduce cost T(M) = a + b·M with M in bytes
(a float32 tensor of p params costs a + b·4p), and prints the MG-WFBP merge
plan — Algorithm 1 (``--algorithm paper``) or the exact minimum of eq. 24
(``--algorithm optimal``) — with the iteration time eq. 8 predicts for WFBP,
eq. 9 for SyncEASGD, and eq. 8 over merged groups (eq. 24) for the plan.
"""

from __future__ import annotations

import json
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from synclab.compute.profile import ModelProfile, ModelProfileError, load_model_profile
from synclab.plans.mgwfbp import CostModel, algorithm1, iteration_time, optimal_plan
from synclab.strategies.mgwfbp import compared_plans

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Plan without a cluster: merge plans and predicted times from a model profile.")
console = Console(stderr=True, soft_wrap=True)

FLOAT32_BYTES = 4


@app.callback()
def plan() -> None:
    """Plan without a cluster: merge plans and predicted times from a model profile."""


class Algorithm(str, Enum):
    paper = "paper"
    optimal = "optimal"


def mgwfbp_answer(profile: ModelProfile, cost: CostModel, algorithm: Algorithm) -> dict:
    """``merged`` (forward order), ``groups`` (in the order sent) and ``iteration_seconds`` per strategy."""
    t_f = profile.forward_seconds
    t_b = [t.backward_seconds for t in profile.tensors]
    sizes = [FLOAT32_BYTES * t.params for t in profile.tensors]
    find = algorithm1 if algorithm is Algorithm.paper else optimal_plan
    plan = find(t_f, t_b, sizes, cost)
    return {
        "merged": list(plan.merged_flags()),
        "groups": [list(g) for g in plan.groups],
        "iteration_seconds": {name: iteration_time(p, t_f, t_b, sizes, cost)
                              for name, p in compared_plans(len(sizes), plan).items()},
    }


@app.command("mgwfbp")
def mgwfbp(profile: Path = typer.Option(..., "--profile", help="Model profile JSON (forward order)."),
           a: float = typer.Option(..., "--a", help="All-reduce start-up time a, seconds."),
           b: float = typer.Option(..., "--b", help="All-reduce time per byte b, seconds per byte."),
           algorithm: Algorithm = typer.Option(Algorithm.paper, "--algorithm",
                                               help="paper: Algorithm 1 as printed; optimal: exact minimum of eq. 24."),
           as_json: bool = typer.Option(False, "--json", help="Print the answer as JSON.")):
    """MG-WFBP merge plan and predicted iteration times (WFBP, SyncEASGD, MG-WFBP) for a profiled model."""
    try:
        cost = CostModel(a=a, b=b)
    except ValueError as e:
        _fail(str(e).replace("CostModel.a", "--a").replace("CostModel.b", "--b"))
    try:
        prof = load_model_profile(profile)
    except ModelProfileError as e:
        _fail(str(e))
    answer = mgwfbp_answer(prof, cost, algorithm)
    if as_json:
        typer.echo(json.dumps(answer))
        return
    merged = answer["merged"]
    typer.echo(f"{'#':>4}  {'tensor':40s} {'params':>12} {'t_b (s)':>10}  merged")
    for i, t in enumerate(prof.tensors):
        flag = "yes" if merged[i] else ""
        typer.echo(f"{i:>4}  {t.name[:40]:40s} {t.params:>12d} {t.backward_seconds:>10.3g}  {flag}")
    typer.echo(f"{len(answer['groups'])} all-reduce(s) per iteration ({algorithm.value}); predicted iteration time:")
    for name, seconds in answer["iteration_seconds"].items():
        typer.echo(f"  {name:10s} {seconds * 1e3:10.3f} ms")


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {escape(message)}", highlight=False)
    raise typer.Exit(2)


@app.command("strategy")
def strategy_plan(name: str = typer.Argument(..., help="Strategy name (synclab strategies)."),
                  profile: Path = typer.Option(..., "--profile", help="Model profile JSON (forward order)."),
                  option: list[str] = typer.Option([], "--set", help="A strategy option KEY=VALUE (repeatable)."),
                  workers: int = typer.Option(2, "--workers", min=1, help="Workers the plan is made for."),
                  ps_shards: int = typer.Option(1, "--ps-shards", min=0, help="PS shards the plan is made for."),
                  seed: int = typer.Option(0, "--seed", help="run.seed the plan is made with.")):
    """The plan a strategy's rank 0 publishes (its ``make_plan``: buckets, slices, placement) for a profiled
    model, as JSON; one parameter tensor per profile entry, each its own layer."""
    from pydantic import ValidationError

    from synclab.core import ParamInfo
    from synclab.strategies import registry

    try:
        cls = registry.get(name)
    except KeyError as e:
        _fail(str(e.args[0] if e.args else e))
    pairs = [o.split("=", 1) for o in option]
    if any(len(p) != 2 for p in pairs):
        _fail(f"--set takes KEY=VALUE, got {[o for o, p in zip(option, pairs) if len(p) != 2]}")
    try:
        options = cls.Options.model_validate({k.removeprefix("strategy."): v for k, v in pairs})
    except ValidationError as e:
        _fail(f"strategy {name!r}: " + "; ".join(f"{'.'.join(map(str, err['loc']))}: {err['msg']}"
                                                 for err in e.errors()))
    try:
        prof = load_model_profile(profile)
    except ModelProfileError as e:
        _fail(str(e))
    params = [ParamInfo(index=i, name=t.name, shape=(t.params,), numel=t.params, layer=i)
              for i, t in enumerate(prof.tensors)]
    plan = cls.make_plan(params, ps_shards=ps_shards, workers=workers, seed=seed, options=options)
    typer.echo(plan.model_dump_json(indent=1))
