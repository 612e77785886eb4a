"""The ``synclab`` command: run experiments, start roles, report.

Each command lives in its own module of this package; this file only builds the
Typer app and registers them, one line each, in the order ``synclab --help``
lists them. Shared helpers (the error exit, logging, node options) are in
:mod:`synclab.cli._common`.
"""

from __future__ import annotations

import os

import typer

from synclab.cli import calibrate as _calibrate
from synclab.cli import chaos as _chaos
from synclab.cli import cleanup as _cleanup
from synclab.cli import compose_env as _compose_env
from synclab.cli import coordinator as _coordinator
from synclab.cli import dashboards as _dashboards
from synclab.cli import docs as _docs
from synclab.cli import examples as _examples
from synclab.cli import load as _load
from synclab.cli import netbench as _netbench
from synclab.cli import plan as _plan
from synclab.cli import plan_stanza as _plan_stanza
from synclab.cli import profile as _profile
from synclab.cli import profiles as _profiles
from synclab.cli import ps as _ps
from synclab.cli import report as _report
from synclab.cli import reproduce as _reproduce
from synclab.cli import run as _run
from synclab.cli import shape as _shape
from synclab.cli import simulate as _simulate
from synclab.cli import stragglers as _stragglers
from synclab.cli import strategies as _strategies
from synclab.cli import tls as _tls
from synclab.cli import tune as _tune
from synclab.cli import validate as _validate
from synclab.cli import version as _version
from synclab.cli import worker as _worker

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="SyncLab: run parameter-synchronization strategies on an emulated cluster.")

app.command("run")(_run.run)
app.command("report")(_report.report_cmd)
app.command("coordinator")(_coordinator.coordinator)
app.command("ps")(_ps.ps)
app.command("worker")(_worker.worker)
app.command("shape")(_shape.shape)
app.command("compose-env")(_compose_env.compose_env)
app.command("profiles")(_profiles.profiles)
app.command("cleanup")(_cleanup.cleanup)
app.command("netbench")(_netbench.netbench)
app.command("profile")(_profile.profile)
app.command("strategies")(_strategies.strategies)
app.command("version")(_version.version)
app.command("docs")(_docs.docs)

plan_app = typer.Typer(no_args_is_help=True, help="Plan strategies from a model profile, without a cluster.")
app.add_typer(plan_app, name="plan")
plan_app.command("mgwfbp")(_plan.mgwfbp)
plan_app.command("stanza")(_plan_stanza.plan_stanza)
plan_app.command("strategy")(_plan.strategy_plan)

app.command("simulate")(_simulate.simulate)
app.command("tune")(_tune.tune)
app.command("stragglers")(_stragglers.stragglers)
app.command("reproduce")(_reproduce.reproduce)
app.command("examples")(_examples.examples)
app.add_typer(_validate.app, name="validate")
app.add_typer(_calibrate.app, name="calibrate")

tls_app = typer.Typer(no_args_is_help=True, help="Mutual TLS for a cluster's gRPC connections (multi-host runs).")
app.add_typer(tls_app, name="tls")
tls_app.command("init")(_tls.tls_init)

app.command("load")(_load.load)
app.command("chaos")(_chaos.chaos)

dashboards_app = typer.Typer(no_args_is_help=True, help="The Grafana dashboards without Grafana: render them "
                                                         "from a live Prometheus.")
app.add_typer(dashboards_app, name="dashboards")
dashboards_app.command("render")(_dashboards.render)


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
