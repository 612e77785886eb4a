"""Prometheus metrics of a node, their HTTP exporter, and the 10 ms traffic sampler.

- :mod:`~synclab.metrics.node`: :class:`NodeMetrics`, one registry per node.
- :mod:`~synclab.metrics.interfaces`: wire-level counters from /sys/class/net.
- :mod:`~synclab.metrics.exporter`: :func:`serve` / :func:`stop` the ``/metrics`` endpoint.
- :mod:`~synclab.metrics.sampler`: :class:`TrafficSampler`, the ``traffic-<node>.csv`` trace.
- :mod:`~synclab.metrics.hostcpu`: how busy the host was over a run's measured iterations (``/proc/stat``).
"""

from synclab.metrics.exporter import Exporter, serve, stop
from synclab.metrics.interfaces import DEFAULT_EXCLUDE, InterfaceReader, interface_counters, select_interfaces
from synclab.metrics.node import NodeMetrics
from synclab.metrics.sampler import COLUMNS as TRAFFIC_COLUMNS
from synclab.metrics.sampler import SamplerStats, TrafficSampler

__all__ = ["DEFAULT_EXCLUDE", "TRAFFIC_COLUMNS", "Exporter", "InterfaceReader", "NodeMetrics", "SamplerStats",
           "TrafficSampler", "interface_counters", "select_interfaces", "serve", "stop"]
