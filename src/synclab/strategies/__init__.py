"""Synchronization strategies: one module, one class each, registered by name."""

from synclab.strategies import registry
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies import local, ps, wfbp  # noqa: F401  (registration)
from synclab.strategies import mgwfbp, synceasgd  # noqa: F401  (registration)
from synclab.strategies import stanza  # noqa: F401  (registration)
from synclab.strategies import asgd, p3, ssdsgd  # noqa: F401  (registration)

__all__ = ["Strategy", "WorkerContext", "registry"]
