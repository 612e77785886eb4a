"""The HTTP endpoint Prometheus scrapes (one per node)."""

from __future__ import annotations

from prometheus_client import start_http_server

from synclab.metrics.node import NodeMetrics


class Exporter:
    def __init__(self, server, thread):
        self._server, self._thread = server, thread
        self.port = server.server_address[1]

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def serve(metrics: NodeMetrics, host: str = "0.0.0.0", port: int = 0) -> Exporter:
    """Serve ``metrics`` on ``host:port`` (0 = any free port; ``Exporter.port`` tells which)."""
    server, thread = start_http_server(port, addr=host, registry=metrics.registry)
    return Exporter(server, thread)
