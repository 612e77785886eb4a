"""TEMPORARY shim until the metrics package lands (same API)."""
import threading
from prometheus_client import CollectorRegistry, Counter, start_http_server


class NodeMetrics:
    def __init__(self, node, role, registry=None):
        self.node, self.role = node, role
        self.registry = registry or CollectorRegistry()
        self._lock = threading.Lock()
        self._sent, self._recv = {}, {}
        self.c_sent = Counter("synclab_bytes_sent_total", "bytes", ["node", "role", "peer", "kind"], registry=self.registry)

    def add_sent(self, peer, kind, n):
        with self._lock:
            self._sent[peer] = self._sent.get(peer, 0) + n
        self.c_sent.labels(self.node, self.role, peer, kind).inc(n)

    def add_received(self, peer, kind, n):
        with self._lock:
            self._recv[peer] = self._recv.get(peer, 0) + n

    def set_queue_bytes(self, peer, band, n): ...
    def set_link_rate(self, d, bps): ...
    def set_backend(self, b): ...
    def observe_iteration(self, *a): ...
    def observe_aggregation(self, s): ...
    def total_sent(self): return sum(self._sent.values())
    def total_received(self): return sum(self._recv.values())
    def sent_by_peer(self): return dict(self._sent)
    def received_by_peer(self): return dict(self._recv)


def serve(metrics, host="0.0.0.0", port=0):
    start_http_server(port, host, registry=metrics.registry)
    return port
