"""How a job's links are emulated: isolation, backend, and what the transport must do itself.

Resolved once by the launcher (or a container entrypoint) from the spec and what
this machine offers, written back into the spec every node receives
(``network.isolation``, ``network.backend``, ``network.app_shaping``, and the
profile inline), and reported in ``summary.json``, a metric and the CLI.

Rules: with kernel shaping (``netns`` isolation, or a container with NET_ADMIN)
rate goes to tc (tbf/htb, ingress through ifb), and delay/jitter/loss to netem
when the kernel has it. What the kernel cannot do is emulated in the transport
— rate, delay and jitter (the ``app`` backend: a token bucket and a delay line
on each node's egress) — except loss: a transport over TCP cannot drop packets,
so loss without netem is refused. Ingress shaping without the kernel is not
emulated either; that is stated in the notes, never silent.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from synclab.config import Spec, SpecError
from synclab.linkprofile import LinkProfile, resolve_for_role
from synclab.netem.dilation import dilate

APP_CAN = ("rate", "delay", "jitter")


@dataclass
class NetworkPlan:
    isolation: str                 # netns | none | docker | container
    profile: LinkProfile | None
    backend: str                   # netem | htb | tbf | app | none
    app_shaping: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def describe(self) -> str:
        parts = [f"isolation {self.isolation}", f"network backend {self.backend}"]
        if self.profile is not None:
            parts.append(f"profile {self.profile.name or 'inline'}")
        if self.app_shaping and self.backend != "app":
            parts.append(f"transport emulates {', '.join(self.app_shaping)}")
        return ", ".join(parts)


def resolve_network(spec: Spec, *, kernel_available: frozenset[str] | None = None,
                    netns_unavailable: str | None | bool = False) -> NetworkPlan:
    """Decide isolation and backend for ``spec`` on this machine (detects when not told)."""
    from synclab.netem.netns import netns_unavailable_reason
    from synclab.netem.tc import choose_backend, detect_backends

    profile = spec.network.link_profile()
    notes: list[str] = []
    isolation = spec.network.isolation
    if isolation == "docker":  # the containers get NET_ADMIN from the engine, whoever launches them
        netns_unavailable = None
        if spec.cluster.colocate_ps:
            raise SpecError("cluster.colocate_ps is not supported with network.isolation docker (one container "
                            "per node): use network.isolation netns")
    if netns_unavailable is False:
        netns_unavailable = netns_unavailable_reason()
    if isolation == "auto":
        isolation = "none" if netns_unavailable else "netns"
        if netns_unavailable:
            notes.append(f"isolation none (netns unavailable: {netns_unavailable})")
    elif isolation == "netns" and netns_unavailable:
        raise SpecError(f"network.isolation: {netns_unavailable}")
    if profile is None or not profile.shapes_anything:
        return NetworkPlan(isolation, profile, "none", [], notes)
    if spec.cluster.colocate_ps:
        if isolation == "none":
            raise SpecError("cluster.colocate_ps needs network.isolation netns: a shard shares its worker's "
                            "kernel-shaped link, and with isolation none every process paces its own traffic")
        if "ps" in profile.roles:
            raise SpecError(f"network.profile {profile.name!r} shapes the ps role apart, but with "
                            "cluster.colocate_ps a shard has no link of its own (it uses its worker's)")
    if isolation == "none":
        wants = _wants(profile)
        if "loss" in wants:
            raise SpecError("network.profile: loss needs tc netem in a network namespace (--isolation netns on a "
                            "kernel with sch_netem); the app backend cannot drop packets under TCP")
        if profile.shapes_ingress:
            notes.append("ingress shaping is not emulated by the app backend: each node's egress is shaped, "
                         "so traffic converging on one node can exceed its rate")
        return NetworkPlan(isolation, profile, "app", sorted(wants & set(APP_CAN)), notes)
    available = detect_backends() if kernel_available is None else kernel_available
    if isolation == "docker" and kernel_available is None and not available:
        notes.append("the kernel's qdiscs can be probed only with root (CAP_NET_ADMIN) on this host: "
                     "the containers leave shaping to the transport")
    choice = choose_backend(dilate(profile, spec.run.dilation), available, True)  # what the host shapes
    left = set(choice.left_to_app)
    if "loss" in left:
        raise SpecError(f"network.profile: loss needs tc netem, which this kernel lacks (found: "
                        f"{', '.join(sorted(available)) or 'nothing'}); refusing rather than ignoring it")
    if left - set(APP_CAN) - {"ingress"}:
        raise SpecError(f"network.profile: cannot emulate {', '.join(sorted(left))} here")
    if "ingress" in left:
        notes.append("ingress shaping needs ifb, which this kernel lacks: egress only")
    if left & {"delay", "jitter"}:
        notes.append(f"kernel has no netem: the transport emulates {', '.join(sorted(left & {'delay', 'jitter'}))}")
    return NetworkPlan(isolation, profile, choice.backend, sorted(left & set(APP_CAN)), notes + [choice.reason])


def _wants(profile: LinkProfile) -> set[str]:
    out = set()
    for role in (None, *profile.roles):
        p = resolve_for_role(profile, role)
        out |= {k for k, v in (("rate", p.rate_bps), ("delay", p.delay_s), ("jitter", p.jitter_s),
                               ("loss", p.loss_pct)) if v}
    return out


def apply_to_spec(spec: Spec, plan: NetworkPlan) -> Spec:
    """The spec the nodes receive: resolved isolation/backend, and the profile inline (nodes need no files)."""
    data = spec.to_dict()
    net = data["network"]
    # the nodes see how they are isolated: none (loopback), netns, or docker (a container each); compose and
    # Swarm containers are told netns (their entrypoint resolves the job): every node but a loopback one owns
    # its interface and reshapes it with the kernel
    net.update(isolation=plan.isolation if plan.isolation in ("none", "docker") else "netns", backend=plan.backend,
               app_shaping=plan.app_shaping, rate=None, delay=None,
               profile=None if plan.profile is None else plan.profile.model_dump(mode="json"))
    return Spec.model_validate(data)


def node_profile(spec: Spec, role: str) -> LinkProfile | None:
    """What ``role``'s link is shaped to on this host: its profile, dilated by ``run.dilation``."""
    p = spec.network.link_profile()
    return None if p is None else resolve_for_role(dilate(p, spec.run.dilation), role)
