"""``synclab ps``: one parameter-server shard process."""

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


def ps(shard: int = typer.Option(-1, "--shard", help="Shard index (-1: assigned by the coordinator)."),
       coordinator_addr: str = CoordinatorOpt, token: str = TokenOpt, host: str = HostOpt,
       advertise: str = AdvertiseOpt, port: int = PortOpt, metrics_port: int = MetricsPortOpt,
       connect_timeout: float = ConnectTimeoutOpt, verbose: bool = VerboseOpt):
    """Run one parameter-server shard."""
    run_node("ps", shard, coordinator_addr, token, host, advertise, port, metrics_port, connect_timeout, verbose)
