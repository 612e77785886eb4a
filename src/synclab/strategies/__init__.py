"""Synchronization strategies: one module, one class each, found by :mod:`synclab.strategies.registry`.

A module dropped into this package registers itself; strategies from outside come through the
entry-point group ``synclab.strategies`` or the spec key ``strategy.module`` (a file path).
"""

from synclab.strategies import registry
from synclab.strategies.base import Strategy, WorkerContext

__all__ = ["Strategy", "WorkerContext", "registry"]
