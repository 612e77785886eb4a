"""``synclab strategies``: list the registered strategies."""

from __future__ import annotations

import sys

import typer


def strategies():
    """List the registered strategies."""
    from synclab.strategies import registry

    for name in registry.names():
        cls = registry.get(name)
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        typer.echo(f"{name:12s} {doc}")
