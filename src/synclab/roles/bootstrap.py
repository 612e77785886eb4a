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
from synclab.transport.node import TCP_CAPABILITY
from synclab.transport.shaper import LinkShaper
from synclab.wire import pb
from synclab.wire.frames import MessageLimits

log = logging.getLogger(__name__)


def free_port(host: str) -> int:
    """A port free now, let go at once (see :func:`reserve_port` for one held until its server binds)."""
    with reserve_port(host) as s:
        return s.getsockname()[1]


def reserve_port(host: str) -> socket.socket:
    """A free port held until its server binds it: bound with SO_REUSEADDR, never listening.

    A port that :func:`free_port` found and let go can be taken again before the server binds it: by the
    kernel as the source port of one of this node's own outgoing connections (to the coordinator, say), and
    the bind then fails with "Failed to bind" (seen once in CI). A port bound with SO_REUSEADDR is skipped by
    the kernel's choice of source ports, and a server that also sets SO_REUSEADDR (gRPC's and
    ``http.server``'s both do) may bind it while no socket listens there. Close it once the server listens.
    """
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((host if host != "0.0.0.0" else "", 0))
    except OSError:
        s.close()
        raise
    return s


@dataclass
class Joined:
    client: CoordinatorClient
    node: pb.NodeInfo
    spec: Spec
    run_dir: Path
    port: int
    metrics: NodeMetrics
    sampler: TrafficSampler
    reservation: socket.socket | None = None  # holds ``port`` until the data-plane server binds it
    tcp_port: int = 0  # the tcp engine's data-plane listener (transport.engine tcp; unused with grpc)
    tcp_reservation: socket.socket | None = None

    def release_port(self) -> None:
        """Let go of the reserved data-plane ports; call once the data-plane server listens on them."""
        for hold in (self.reservation, self.tcp_reservation):
            if hold is not None:
                hold.close()
        self.reservation = self.tcp_reservation = None

    @property
    def name(self) -> str:
        return self.node.name


def join(role: str, index: int, coordinator: str, token: str, *, host: str, advertise: str, port: int,
         metrics_port: int, connect_timeout_s: float) -> Joined:
    """Connect to the coordinator, reserve ports, register, start the metrics exporter."""
    hint = f"{role}{index if index >= 0 else ''}"
    client = CoordinatorClient(coordinator, token, hint, connect_timeout_s=connect_timeout_s)
    data_hold = None if port else reserve_port(host)
    # The tcp engine's listener (transport.engine tcp): the spec comes with the registration reply, so its port
    # is reserved and advertised (NodeInfo.capabilities) either way; a fixed --port P gives P + 1.
    tcp_hold = None if port else reserve_port(host)
    metrics_hold = None if metrics_port else reserve_port(host)
    try:
        tcp_port = port + 1 if port else tcp_hold.getsockname()[1]
        port = port or data_hold.getsockname()[1]
        metrics_port = metrics_port or metrics_hold.getsockname()[1]
        reply = client.register(role, index, f"{advertise}:{port}", f"http://{advertise}:{metrics_port}/metrics",
                                capabilities=(f"{TCP_CAPABILITY}{tcp_port}",))
        spec = parse_spec(json.loads(reply.spec_json))
        # Wire-level counters are per node only in a namespace or container; on loopback they are shared.
        metrics = NodeMetrics(reply.node.name, role, interfaces=["lo"] if spec.network.isolation == "none" else None)
        serve(metrics, host=host, port=metrics_port)
    except BaseException:
        for hold in (data_hold, tcp_hold):
            if hold is not None:
                hold.close()
        raise
    finally:
        if metrics_hold is not None:
            metrics_hold.close()
    run_dir = Path(reply.run_dir)
    sampler = TrafficSampler(metrics, run_dir / f"traffic-{reply.node.name}.csv",
                             interval_s=spec.run.traffic_sample_ms / 1000).start()
    log.info("%s registered; data plane :%d, metrics :%d", reply.node.name, port, metrics_port)
    return Joined(client, reply.node, spec, run_dir, port, metrics, sampler, reservation=data_hold,
                  tcp_port=tcp_port, tcp_reservation=tcp_hold)


def message_limits(cls, plan, params, spec, element_bytes: int = 4) -> MessageLimits:
    """What one peer may make this node hold: the strategy's largest message plus margin (wire.frames)."""
    largest = cls.max_payload_bytes(plan, params, batch_size=spec.model.batch_size, options=spec.strategy.options,
                                    element_bytes=element_bytes)
    return MessageLimits.for_payload(largest, spec.transport.queue_bytes)


def shaper_for(spec: Spec, role: str) -> LinkShaper:
    """What the transport emulates itself (``network.app_shaping``): egress rate (with the profile's
    ``burst`` when it sets one, as tc would use it), delay, jitter."""
    from synclab.roles.network import node_profile

    p = node_profile(spec, role)
    app = set(spec.network.app_shaping)
    if p is None or not app:
        return LinkShaper(chunk_bytes=spec.transport.chunk_bytes)
    return LinkShaper(rate_bps=p.rate_bps if "rate" in app else None,
                      burst_bytes=p.burst_bytes if "rate" in app else None,
                      delay_s=p.delay_s if "delay" in app else 0.0,
                      jitter_s=p.jitter_s if "jitter" in app else 0.0, chunk_bytes=spec.transport.chunk_bytes)


def report_network(spec: Spec, role: str, metrics: NodeMetrics) -> None:
    """Export the backend and the configured rate of this node's link."""
    from synclab.roles.network import node_profile

    metrics.set_backend(spec.network.backend)
    p = node_profile(spec, role)
    if p is not None and p.rate_bps:
        for direction in ("egress", "ingress"):
            if (p.shapes_egress if direction == "egress" else p.shapes_ingress):
                metrics.set_link_rate(direction, p.rate_bps)


def reshaper(spec: Spec, role: str, node: str, shaper: LinkShaper, metrics: NodeMetrics):
    """The heartbeat's handler for ``shape`` commands: re-apply tc on this node's own link
    (netns or container, kernel backends) or retune the transport's token bucket (app)."""
    from synclab.linkprofile import profile_from_mapping, resolve_for_role
    from synclab.netem.dilation import dilate

    machine = spec.machine_of(node)
    if machine != node:  # cluster.colocate_ps: the link is the worker's, which reshapes it
        def on_its_workers_link(cmd) -> None:
            if cmd.kind != "shape":
                raise ValueError(f"unknown command {cmd.kind!r}")
            if cmd.target in (node, role):
                raise RuntimeError(f"{node} has no link of its own (cluster.colocate_ps): reshape {machine}")
            log.info("%s: %s reshapes the link this shard shares", node, machine)

        return on_its_workers_link

    def handle(cmd) -> None:
        """Apply a reshape; raises when it cannot (the heartbeat reports that, and the command fails)."""
        if cmd.kind != "shape":
            raise ValueError(f"unknown command {cmd.kind!r}")
        profile = resolve_for_role(dilate(profile_from_mapping(json.loads(cmd.args_json)["profile"]),
                                          spec.run.dilation), role)
        # What nobody here would apply (the coordinator refuses these up front when it knows the backend).
        unmet = [w for w in ("delay", "jitter") if getattr(profile, f"{w}_s") != getattr(shaper, f"{w}_s")]
        unmet += ["loss"] if profile.loss_pct else []
        if spec.network.backend in ("netem", "htb", "tbf"):
            from synclab.netem import tc
            from synclab.netem.netns import NODE_IFB

            ifb = NODE_IFB if spec.network.isolation != "none" else None
            # The backend that shaped this link at start is known to work here; probing again would
            # need a throwaway namespace, which a container cannot create.
            if spec.network.backend != "netem" and unmet:
                raise RuntimeError(f"{node}: backend {spec.network.backend} cannot change {', '.join(unmet)} at run "
                                   f"time; nothing applied")
            applied = tc.apply(spec.network.interface, profile, ifb_dev=ifb, privileged=True,
                               available=frozenset({spec.network.backend, "ifb"}))
            if "rate" in applied.left_to_app:
                shaper.set_rate(profile.rate_bps)
            log.info("%s reshaped %s: %s via %s", node, spec.network.interface, profile.name, applied.backend)
        else:
            if unmet:
                raise RuntimeError(f"{node}: backend {spec.network.backend} (the transport's token bucket) cannot "
                                   f"change {', '.join(unmet)} at run time; nothing applied")
            shaper.set_rate(profile.rate_bps)
            log.info("%s reshaped its transport token bucket: %s", node, profile.name)
        for direction, on in (("egress", profile.shapes_egress), ("ingress", profile.shapes_ingress)):
            metrics.set_link_rate(direction, profile.rate_bps if (on and profile.rate_bps) else 0)

    return handle
