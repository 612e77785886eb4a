"""``synclab worker``: one training worker process."""

from __future__ import annotations

import typer

from synclab.cli._common import (
    AdvertiseOpt,
    ConnectTimeoutOpt,
    CoordinatorOpt,
    HostOpt,
    MetricsPortOpt,
    PortOpt,
    TokenOpt,
    VerboseOpt,
    run_node,
)


def worker(rank: int = typer.Option(-1, "--rank", help="Worker rank (-1: assigned by the coordinator)."),
           coordinator_addr: str = CoordinatorOpt, token: str = TokenOpt, host: str = HostOpt,
           advertise: str = AdvertiseOpt, port: int = PortOpt, metrics_port: int = MetricsPortOpt,
           connect_timeout: float = ConnectTimeoutOpt, verbose: bool = VerboseOpt):
    """Run one training worker."""
    run_node("worker", rank, coordinator_addr, token, host, advertise, port, metrics_port, connect_timeout, verbose)
