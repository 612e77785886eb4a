"""``synclab strategies``: list the registered strategies, where each comes from and its simulator model."""

from __future__ import annotations

import sys

import typer


def strategies():
    """List the registered strategies (built in, entry points of group synclab.strategies, strategy.module)."""
    from synclab.strategies import registry

    for name in registry.names():
        cls = registry.get(name)
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        model = type(cls.sim_model).__name__ if cls.sim_model is not None else "none (emulator only)"
        origin = registry.origin(name)
        extra = "" if origin == "synclab" else f"  [from {origin}]"
        typer.echo(f"{name:12s} {doc}  (sim: {model}){extra}")
