"""Prometheus metrics of one node, in a registry of its own (several nodes may share a process).

Names follow DESIGN.md and Prometheus conventions (base units, ``_total``
counters). Byte counters are also kept as plain integers so the 10 ms traffic
sampler and the run records read them without touching Prometheus internals.
"""

from __future__ import annotations

import threading
from pathlib import Path

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily

ITERATION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 25, 50, 100)
AGGREGATION_BUCKETS_S = (1e-5, 3e-5, 1e-4, 3e-4, 1e-3, 3e-3, 0.01, 0.03, 0.1, 0.3, 1)
SYS_NET = Path("/sys/class/net")


def interface_counters(interfaces: list[str] | None = None, root: Path = SYS_NET) -> dict[str, tuple[int, int]]:
    """(tx_bytes, rx_bytes) per interface from sysfs; by default every interface but ``lo``
    (``lo`` alone when it is the only one, as in a bare network namespace)."""
    try:
        names = sorted(p.name for p in root.iterdir())
    except OSError:
        return {}
    if interfaces is None:
        interfaces = [n for n in names if n != "lo"] or [n for n in names if n == "lo"]
    out = {}
    for name in interfaces:
        try:
            tx = int((root / name / "statistics" / "tx_bytes").read_text())
            rx = int((root / name / "statistics" / "rx_bytes").read_text())
        except (OSError, ValueError):
            continue
        out[name] = (tx, rx)
    return out


class _InterfaceCollector:
    """Wire-level counters read at scrape time (like bwm-ng in P3 §5)."""

    def __init__(self, node: str, interfaces: list[str] | None):
        self.node, self.interfaces = node, interfaces

    def collect(self):
        tx = CounterMetricFamily("synclab_interface_transmit_bytes", "Bytes sent on the wire by an interface",
                                 labels=["node", "interface"])
        rx = CounterMetricFamily("synclab_interface_receive_bytes", "Bytes received on the wire by an interface",
                                 labels=["node", "interface"])
        for name, (t, r) in interface_counters(self.interfaces).items():
            tx.add_metric([self.node, name], t)
            rx.add_metric([self.node, name], r)
        yield tx
        yield rx


class NodeMetrics:
    def __init__(self, node: str, role: str, registry: CollectorRegistry | None = None,
                 interfaces: list[str] | None = None):
        self.node, self.role = node, role
        self.interfaces = interfaces
        r = self.registry = registry or CollectorRegistry()
        peer_labels = ["node", "role", "peer", "kind"]
        self._sent_c = Counter("synclab_bytes_sent", "Payload bytes sent to a peer", peer_labels, registry=r)
        self._recv_c = Counter("synclab_bytes_received", "Payload bytes received from a peer", peer_labels, registry=r)
        self._iter_h = Histogram("synclab_iteration_seconds", "Iteration time", ["node", "role"],
                                 buckets=ITERATION_BUCKETS_S, registry=r)
        self._compute_c = Counter("synclab_compute_seconds", "Forward+backward compute time", ["node"], registry=r)
        self._wait_c = Counter("synclab_comm_wait_seconds", "Communication time not overlapped with compute",
                               ["node"], registry=r)
        self._samples_c = Counter("synclab_samples", "Training samples processed", ["node"], registry=r)
        self._queue_g = Gauge("synclab_send_queue_bytes", "Bytes queued for a peer, by priority band",
                              ["node", "peer", "priority_band"], registry=r)
        self._rate_g = Gauge("synclab_link_rate_bits_per_second", "Configured link rate", ["node", "direction"],
                             registry=r)
        self._loss_g = Gauge("synclab_training_loss", "Training loss of the last iteration", ["node"], registry=r)
        self._backend_g = Gauge("synclab_network_backend_info", "Link-shaping backend in use (value 1)",
                                ["node", "backend"], registry=r)
        self._agg_h = Histogram("synclab_ps_aggregation_seconds", "PS: time to apply one aggregated update",
                                ["node"], buckets=AGGREGATION_BUCKETS_S, registry=r)
        r.register(_InterfaceCollector(node, interfaces))
        self._lock = threading.Lock()
        self._sent: dict[str, int] = {}
        self._recv: dict[str, int] = {}
        self._sent_total = 0
        self._recv_total = 0
        self._children: dict[tuple, object] = {}

    # -- hot path ------------------------------------------------------------------
    def _child(self, counter, peer: str, kind: str):
        key = (id(counter), peer, kind)
        c = self._children.get(key)
        if c is None:
            c = self._children[key] = counter.labels(self.node, self.role, peer, kind)
        return c

    def add_sent(self, peer: str, kind: str, nbytes: int) -> None:
        with self._lock:
            self._sent[peer] = self._sent.get(peer, 0) + nbytes
            self._sent_total += nbytes
        self._child(self._sent_c, peer, kind).inc(nbytes)

    def add_received(self, peer: str, kind: str, nbytes: int) -> None:
        with self._lock:
            self._recv[peer] = self._recv.get(peer, 0) + nbytes
            self._recv_total += nbytes
        self._child(self._recv_c, peer, kind).inc(nbytes)

    def set_queue_bytes(self, peer: str, band: str, nbytes: int) -> None:
        self._queue_g.labels(self.node, peer, band).set(nbytes)

    # -- per iteration / rare --------------------------------------------------------
    def observe_iteration(self, seconds: float, compute_s: float, comm_wait_s: float, samples: int,
                          loss: float) -> None:
        self._iter_h.labels(self.node, self.role).observe(seconds)
        self._compute_c.labels(self.node).inc(compute_s)
        self._wait_c.labels(self.node).inc(comm_wait_s)
        self._samples_c.labels(self.node).inc(samples)
        self._loss_g.labels(self.node).set(loss)

    def observe_aggregation(self, seconds: float) -> None:
        self._agg_h.labels(self.node).observe(seconds)

    def set_link_rate(self, direction: str, bps: float) -> None:
        self._rate_g.labels(self.node, direction).set(bps)

    def set_backend(self, name: str) -> None:
        self._backend_g.clear()
        self._backend_g.labels(self.node, name).set(1)

    # -- plain totals ------------------------------------------------------------------
    def total_sent(self) -> int:
        return self._sent_total

    def total_received(self) -> int:
        return self._recv_total

    def sent_by_peer(self) -> dict[str, int]:
        with self._lock:
            return dict(self._sent)

    def received_by_peer(self) -> dict[str, int]:
        with self._lock:
            return dict(self._recv)
