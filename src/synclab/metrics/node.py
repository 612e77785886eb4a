"""Prometheus metrics of one node, in a registry of its own (several nodes may share a process).

Names follow DESIGN.md "Metrics" and Prometheus conventions (base units,
``_total`` counters). Byte counters are also kept as plain integers under a
lock, so the 10 ms traffic sampler and the run records read them without
touching Prometheus internals.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import GaugeMetricFamily

from synclab.metrics.exporter import Exporter
from synclab.metrics.interfaces import DEFAULT_EXCLUDE, SYS_NET, InterfaceCollector, list_interfaces, select_interfaces

# 1-2.5-5 per decade from 1 ms to 100 s: a replayed small model to a slow-link ImageNet iteration.
ITERATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 25.0, 50.0,
                       100.0)
# One aggregation (sum + optimizer step of one slice or tensor): 10 µs to 1 s.
AGGREGATION_BUCKETS_S = (1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                         0.5, 1.0)


# What a 10 ms bin of the traffic sampler saw (P3 Fig. 8/9): neither direction moved payload bytes, only one
# did, or both at once.
BIN_STATES = ("idle", "tx", "rx", "both")


class PeakSinceScrape:
    """``synclab_traffic_peak_bits_per_second{node, direction}``: the highest 10 ms rate since the last scrape.

    Each collection reports the peak of the bins seen since the previous one and starts over, so a panel of
    it shows the bursts P3 Fig. 8 shows that a rate over a scrape interval averages away. (With two scrapers
    each sees the peaks since its own last look only if they alternate; Prometheus is the one that matters.)
    """

    def __init__(self, node: str):
        self.node = node
        self._lock = threading.Lock()
        self._peak = {"tx": 0.0, "rx": 0.0}

    def observe(self, tx_bps: float, rx_bps: float) -> None:
        with self._lock:
            self._peak["tx"] = max(self._peak["tx"], tx_bps)
            self._peak["rx"] = max(self._peak["rx"], rx_bps)

    def collect(self):
        with self._lock:
            peak, self._peak = self._peak, {"tx": 0.0, "rx": 0.0}
        g = GaugeMetricFamily("synclab_traffic_peak_bits_per_second",
                              "Highest 10 ms payload rate since the last scrape", labels=("node", "direction"))
        for direction, value in peak.items():
            g.add_metric((self.node, direction), value)
        yield g


class NodeMetrics:
    """Every metric one node (worker, PS shard, coordinator) exports.

    ``interfaces``/``exclude_interfaces`` choose the wire-level counters (see
    :func:`~synclab.metrics.interfaces.select_interfaces`); ``sys_net`` is the
    sysfs directory they are read from.
    """

    def __init__(self, node: str, role: str, registry: CollectorRegistry | None = None, *,
                 interfaces: Sequence[str] | None = None, exclude_interfaces: Sequence[str] = DEFAULT_EXCLUDE,
                 sys_net: Path = SYS_NET):
        if not node or not role:
            raise ValueError(f"node and role must be non-empty, got node={node!r} role={role!r}")
        self.node, self.role = node, role
        self.interfaces, self.exclude_interfaces, self.sys_net = interfaces, tuple(exclude_interfaces), sys_net
        self.registry = r = registry if registry is not None else CollectorRegistry()
        self.exporters: list[Exporter] = []  # HTTP endpoints started by serve(); stop() ends them

        peer_labels = ("node", "role", "peer", "kind")
        self._sent_c = Counter("synclab_bytes_sent", "Payload bytes sent to a peer", peer_labels, registry=r)
        self._recv_c = Counter("synclab_bytes_received", "Payload bytes received from a peer", peer_labels,
                               registry=r)
        self._iteration_h = Histogram("synclab_iteration_seconds", "Wall time of one training iteration",
                                      ("node", "role"), buckets=ITERATION_BUCKETS_S, registry=r)
        self._compute_c = Counter("synclab_compute_seconds", "Forward + backward compute time", ("node",),
                                  registry=r)
        self._comm_wait_c = Counter("synclab_comm_wait_seconds",
                                    "Communication time not overlapped with compute", ("node",), registry=r)
        self._samples_c = Counter("synclab_samples", "Training samples processed", ("node",), registry=r)
        self._queue_g = Gauge("synclab_send_queue_bytes", "Bytes queued for a peer, by priority band",
                              ("node", "peer", "priority_band"), registry=r)
        self._link_rate_g = Gauge("synclab_link_rate_bits_per_second", "Configured link rate",
                                  ("node", "direction"), registry=r)
        self._loss_g = Gauge("synclab_training_loss", "Training loss of the last iteration", ("node",), registry=r)
        self._backend_g = Gauge("synclab_network_backend_info", "Link-shaping backend in use (value 1)",
                                ("node", "backend"), registry=r)
        self._aggregation_h = Histogram("synclab_ps_aggregation_seconds",
                                        "PS shard: time to aggregate and apply one update", ("node",),
                                        buckets=AGGREGATION_BUCKETS_S, registry=r)
        self._bins_c = Counter("synclab_traffic_bins", "10 ms bins of the traffic sampler by what moved: "
                               "idle, tx only, rx only, both (P3 Fig. 8/9)", ("node", "state"), registry=r)
        self._bin_children = {state: self._bins_c.labels(node, state) for state in BIN_STATES}
        self.peak = PeakSinceScrape(node)
        r.register(self.peak)
        r.register(InterfaceCollector(node, interfaces, self.exclude_interfaces, sys_net))

        # Labelled children are looked up once per (peer, kind): .labels() costs more than .inc().
        self._sent_children: dict[tuple[str, str], Counter] = {}
        self._recv_children: dict[tuple[str, str], Counter] = {}
        self._queue_children: dict[tuple[str, str], Gauge] = {}
        self._lock = threading.Lock()
        self._sent_total = 0
        self._recv_total = 0
        self._sent_by_peer: dict[str, int] = {}
        self._recv_by_peer: dict[str, int] = {}

    # -- hot path: every chunk sent or received ------------------------------------------------------------

    def add_sent(self, peer: str, kind: str, nbytes: int) -> None:
        child = self._sent_children.get((peer, kind))
        if child is None:
            child = self._sent_children[(peer, kind)] = self._sent_c.labels(self.node, self.role, peer, kind)
        child.inc(nbytes)  # first: refuses a negative count before the plain totals move
        with self._lock:
            self._sent_total += nbytes
            self._sent_by_peer[peer] = self._sent_by_peer.get(peer, 0) + nbytes

    def add_received(self, peer: str, kind: str, nbytes: int) -> None:
        child = self._recv_children.get((peer, kind))
        if child is None:
            child = self._recv_children[(peer, kind)] = self._recv_c.labels(self.node, self.role, peer, kind)
        child.inc(nbytes)
        with self._lock:
            self._recv_total += nbytes
            self._recv_by_peer[peer] = self._recv_by_peer.get(peer, 0) + nbytes

    def set_queue_bytes(self, peer: str, band: str, nbytes: int) -> None:
        child = self._queue_children.get((peer, band))
        if child is None:
            child = self._queue_children[(peer, band)] = self._queue_g.labels(self.node, peer, band)
        child.set(nbytes)

    # -- once per iteration, or rarer ----------------------------------------------------------------------

    def observe_iteration(self, seconds: float, compute_s: float, comm_wait_s: float, samples: int,
                          loss: float) -> None:
        self._iteration_h.labels(self.node, self.role).observe(seconds)
        self._compute_c.labels(self.node).inc(compute_s)
        self._comm_wait_c.labels(self.node).inc(comm_wait_s)
        self._samples_c.labels(self.node).inc(samples)
        self._loss_g.labels(self.node).set(loss)

    def observe_bin(self, tx_bytes: int, rx_bytes: int, tx_bps: float, rx_bps: float) -> None:
        """One 10 ms bin of the traffic sampler: which directions moved payload bytes, and its rates."""
        state = ("both" if rx_bytes > 0 else "tx") if tx_bytes > 0 else ("rx" if rx_bytes > 0 else "idle")
        self._bin_children[state].inc()
        self.peak.observe(tx_bps, rx_bps)

    def observe_aggregation(self, seconds: float) -> None:
        self._aggregation_h.labels(self.node).observe(seconds)

    def set_link_rate(self, direction: str, bps: float) -> None:
        self._link_rate_g.labels(self.node, direction).set(bps)

    def set_backend(self, name: str) -> None:
        """Record the shaping backend (``netem``, ``htb``, ``tbf``, ``app``, ``none``); replaces the previous one."""
        self._backend_g.clear()
        self._backend_g.labels(self.node, name).set(1)

    # -- plain totals (no Prometheus internals) ------------------------------------------------------------

    def totals(self) -> tuple[int, int]:
        """(bytes sent, bytes received) so far, read together."""
        with self._lock:
            return self._sent_total, self._recv_total

    def total_sent(self) -> int:
        return self._sent_total

    def total_received(self) -> int:
        return self._recv_total

    def sent_by_peer(self) -> dict[str, int]:
        with self._lock:
            return dict(self._sent_by_peer)

    def received_by_peer(self) -> dict[str, int]:
        with self._lock:
            return dict(self._recv_by_peer)

    def wire_interfaces(self) -> list[str]:
        """The interfaces whose wire-level counters this node reports, as present now."""
        return select_interfaces(list_interfaces(self.sys_net), self.interfaces, self.exclude_interfaces)
