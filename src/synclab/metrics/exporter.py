"""The HTTP endpoint Prometheus scrapes, one per node and registry."""

from __future__ import annotations

import threading
from typing import Protocol, Self

from prometheus_client import CollectorRegistry, start_http_server


class Served(Protocol):
    """What :func:`serve` and :func:`stop` need of a node's metrics (``NodeMetrics`` has both)."""

    registry: CollectorRegistry
    exporters: list["Exporter"]


class Exporter:
    """Serves one registry's ``/metrics`` on ``host:port`` from a daemon thread.

    ``port=0`` binds any free port; ``self.port`` is the one bound (prometheus-client
    ≥ 0.20 returns the server, whose ``server_port`` holds it). ``host``: the node's own
    address (its gRPC server's); loopback unless a caller names a wider one.
    """

    def __init__(self, registry: CollectorRegistry, host: str = "127.0.0.1", port: int = 0):
        self._server, self._thread = start_http_server(port, addr=host, registry=registry)
        self.host = host
        self.port: int = self._server.server_port
        self._lock = threading.Lock()
        self._stopped = False

    def stop(self) -> None:
        """Stop serving and release the port (idempotent)."""
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def serve(metrics: Served, host: str = "127.0.0.1", port: int = 0) -> int:
    """Serve ``metrics`` over HTTP and return the port bound (``port=0``: any free one).

    The exporter is recorded in ``metrics.exporters``; :func:`stop` ends it.
    """
    exporter = Exporter(metrics.registry, host, port)
    metrics.exporters.append(exporter)
    return exporter.port


def stop(metrics: Served) -> None:
    """Stop every exporter :func:`serve` started for ``metrics`` (idempotent)."""
    while metrics.exporters:
        metrics.exporters.pop().stop()
