"""What the commands of ``synclab`` share: the error console, logging and the node options."""

from __future__ import annotations

import logging
import os
import sys

import typer
from rich.console import Console

console = Console(stderr=True)

TokenOpt = typer.Option(..., "--token", envvar="SYNCLAB_TOKEN", show_envvar=True,
                        help="Shared job token (the launcher sets SYNCLAB_TOKEN).")


def setup_logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def exit_process(code: int) -> None:
    """Leave a node process once its work is reported and its servers and channels are closed.

    Interpreter teardown can race gRPC core's own threads and abort ("terminate
    called without an active exception", exit -6 — seen once in a few hundred
    runs, after the job had succeeded); skip it.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def run_node(role: str, index: int, coordinator_addr: str, token: str, host: str, advertise: str, port: int,
             metrics_port: int, connect_timeout: float, verbose: bool) -> None:
    """Run a PS shard or a worker until its job ends, then leave the process (see :func:`exit_process`)."""
    from synclab.roles.client import CoordinatorUnreachable

    setup_logging(verbose)
    if ":" not in coordinator_addr:
        fail(f"--coordinator must be host:port, got {coordinator_addr!r}")
    if role == "ps":
        from synclab.roles.ps import run_ps as main_fn
    else:
        from synclab.roles.worker import run_worker as main_fn
    try:
        code = main_fn(index, coordinator_addr, token, host=host, advertise=advertise, port=port,
                       metrics_port=metrics_port, connect_timeout_s=connect_timeout)
    except CoordinatorUnreachable as e:
        fail(str(e), 1)
    exit_process(code)


CoordinatorOpt = typer.Option(..., "--coordinator", envvar="SYNCLAB_COORDINATOR", help="host:port of the coordinator.")
HostOpt = typer.Option("0.0.0.0", "--host", help="Address to bind the data-plane and metrics servers to.")
AdvertiseOpt = typer.Option("127.0.0.1", "--advertise", help="Address peers use to reach this node.")
PortOpt = typer.Option(0, "--port", help="Data-plane port (0: any free port).")
MetricsPortOpt = typer.Option(0, "--metrics-port", help="Prometheus metrics port (0: any free port).")
ConnectTimeoutOpt = typer.Option(30.0, "--connect-timeout", help="Seconds to reach the coordinator.")
VerboseOpt = typer.Option(False, "-v", "--verbose")
