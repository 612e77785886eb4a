"""``synclab coordinator``: the coordinator process of one job."""

from __future__ import annotations

from pathlib import Path

import typer

from synclab.cli._common import TokenOpt, exit_process, fail, setup_logging


def coordinator(spec: Path = typer.Option(..., "--spec"), run_dir: Path = typer.Option(..., "--run-dir"),
                listen: str = typer.Option("0.0.0.0:50051", "--listen"), token: str = TokenOpt,
                metrics_port: int = typer.Option(0, "--metrics-port"),
                verbose: bool = typer.Option(False, "-v", "--verbose")):
    """Run the coordinator of one job (registers nodes, barriers, heartbeats, run records)."""
    from synclab.config import SpecError, load_spec
    from synclab.roles.coordinator import run_coordinator

    setup_logging(verbose)
    problem = listen_problem(listen)
    if problem:
        fail(f"--listen {listen!r}: {problem}")
    if run_dir.exists() and not run_dir.is_dir():
        fail(f"--run-dir {run_dir} is a file, not a folder")
    try:
        s = load_spec(spec)
    except SpecError as e:
        fail(f"invalid spec: {e}")
    try:
        code = run_coordinator(s, run_dir, listen, token, metrics_port=metrics_port)
    except OSError as e:  # the address is well formed but cannot be bound (not this host's, or taken)
        fail(str(e), 1)
    exit_process(code)


def listen_problem(address: str) -> str | None:
    """What is wrong with a ``host:port`` to listen on, or None (``[v6]:port`` and ``0.0.0.0:0`` are fine)."""
    host, sep, port = address.rpartition(":")
    if not sep or not host:
        return "expected host:port (e.g. 127.0.0.1:50051)"
    if not port.isdigit() or not 0 <= int(port) <= 65535:
        return f"port {port!r} is not a number from 0 to 65535"
    if host.startswith("[") != host.endswith("]") or (":" in host and not host.startswith("[")):
        return "an IPv6 host goes in brackets, e.g. [::1]:50051"
    if any(c.isspace() for c in host):
        return "the host contains whitespace"
    return None
