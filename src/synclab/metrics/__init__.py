"""Prometheus metrics per node, the HTTP exporter, and the 10 ms traffic sampler."""

from synclab.metrics.exporter import Exporter, serve
from synclab.metrics.node import NodeMetrics, interface_counters
from synclab.metrics.sampler import TrafficSampler

__all__ = ["Exporter", "NodeMetrics", "TrafficSampler", "interface_counters", "serve"]
