"""What every data-plane node (worker, PS shard) does before its own work: ports, registration, metrics."""

from __future__ import annotations

import json
import logging
import socket
from dataclasses import dataclass
from pathlib import Path

from synclab.config import Spec, parse_spec
from synclab.metrics import NodeMetrics, TrafficSampler, serve
from synclab.roles.client import CoordinatorClient
from synclab.transport.shaper import LinkShaper
from synclab.wire import pb

log = logging.getLogger(__name__)


def free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host if host != "0.0.0.0" else "", 0))
        return s.getsockname()[1]


@dataclass
class Joined:
    client: CoordinatorClient
    node: pb.NodeInfo
    spec: Spec
    run_dir: Path
    port: int
    metrics: NodeMetrics
    sampler: TrafficSampler

    @property
    def name(self) -> str:
        return self.node.name


def join(role: str, index: int, coordinator: str, token: str, *, host: str, advertise: str, port: int,
         metrics_port: int, connect_timeout_s: float) -> Joined:
    """Connect to the coordinator, reserve ports, register, start the metrics exporter."""
    hint = f"{role}{index if index >= 0 else ''}"
    client = CoordinatorClient(coordinator, token, hint, connect_timeout_s=connect_timeout_s)
    port = port or free_port(host)
    metrics_port = metrics_port or free_port(host)
    reply = client.register(role, index, f"{advertise}:{port}", f"http://{advertise}:{metrics_port}/metrics")
    spec = parse_spec(json.loads(reply.spec_json))
    metrics = NodeMetrics(reply.node.name, role)
    serve(metrics, host=host, port=metrics_port)
    run_dir = Path(reply.run_dir)
    sampler = TrafficSampler(metrics, run_dir / f"traffic-{reply.node.name}.csv").start()
    log.info("%s registered; data plane :%d, metrics :%d", reply.node.name, port, metrics_port)
    return Joined(client, reply.node, spec, run_dir, port, metrics, sampler)


def shaper_for(spec: Spec) -> LinkShaper:
    """The ``app`` backend: the transport shapes egress itself (rate and one-way delay)."""
    return LinkShaper(rate_bps=spec.network.rate_bps, delay_s=spec.network.delay_s,
                      chunk_bytes=spec.transport.chunk_bytes)
