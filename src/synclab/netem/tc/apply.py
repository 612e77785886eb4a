"""Applying a profile to a device (and clearing it): run the builders' commands, then verify by reading back."""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from typing import Literal

from synclab.linkprofile import LinkProfile, format_rate
from synclab.netem.tc.commands import (
    OFFLOAD_FEATURES,
    ROOT_HANDLE,
    clear_commands,
    egress_commands,
    ifb_create_commands,
    ifb_name_for,
    ingress_commands,
    offload_commands,
    root_kind,
)
from synclab.netem.tc.probe import BackendChoice, choose_backend, detect_backends, has_net_admin, iproute2_missing
from synclab.netem.tc.readback import Qdisc, link_exists, read_classes, read_qdiscs, verify
from synclab.netem.tc.runner import Runner, ShapingError, run_cmd
from synclab.transport.shaper import profile_bucket


@dataclass
class Applied:
    """What :func:`apply` did to one device: the choice, the commands, offloads, and the read-back."""

    dev: str
    netns: str | None
    profile: LinkProfile
    choice: BackendChoice
    ifb_dev: str | None = None
    commands: list[list[str]] = field(default_factory=list)
    offloads: str = ""
    egress: list[Qdisc] = field(default_factory=list)
    ingress: list[Qdisc] = field(default_factory=list)

    @property
    def backend(self) -> str:
        return self.choice.backend

    @property
    def left_to_app(self) -> frozenset[str]:
        return self.choice.left_to_app

    @property
    def rate_bps(self) -> int | None:
        return self.profile.rate_bps

    def summary(self) -> str:
        where = f"{self.netns}:{self.dev}" if self.netns else self.dev
        parts = [f"{where}: backend {self.backend}", f"rate {format_rate(self.rate_bps)}",
                 f"direction {self.profile.direction}"]
        if self.left_to_app:
            parts.append(f"left to the transport: {', '.join(sorted(self.left_to_app))}")
        if self.offloads:
            parts.append(self.offloads)
        return "; ".join(parts)


def _run_all(cmds: list[list[str]], netns: str | None, runner: Runner, log: list[list[str]]) -> None:
    for c in cmds:
        runner(c, netns)
        log.append(c)


def _install(dev: str, profile: LinkProfile, backend: str, cmds: list[list[str]], netns: str | None,
             runner: Runner, log: list[list[str]]) -> None:
    """Run ``cmds`` shaping ``dev``, first removing a root qdisc of another kind (replace cannot change kinds)."""
    want = root_kind(profile, backend)
    root = next((q for q in read_qdiscs(dev, netns, runner=runner) if q.is_root), None)
    if root is not None and not root.is_default and (root.kind != want or root.handle != ROOT_HANDLE):
        _run_all(clear_commands(dev, root=True, ingress=False), netns, runner, log)
    elif root is not None and root.kind == "htb" == want:
        # htb's root cannot be "changed" (the kernel refuses); its options never vary here, so keep it
        cmds = [c for c in cmds if not (c[:3] == ["tc", "qdisc", "replace"] and "root" in c)]
    elif root is not None and root.kind == "tbf" == want and _shrinks_tbf_bucket(root, profile):
        # Changing a tbf keeps its queue, and a packet queued under the old, larger bucket (a 64 KB
        # GSO super-packet) that the new bucket cannot hold never earns its tokens: the link stops
        # for good (seen reshaping 1gbit -> 100mbit under load). A new qdisc drops that queue instead
        # (TCP resends it); the link is unshaped for the few ms between the two commands.
        _run_all(clear_commands(dev, root=True, ingress=False), netns, runner, log)
    _run_all(cmds, netns, runner, log)


def _shrinks_tbf_bucket(root: Qdisc, profile: LinkProfile) -> bool:
    """Whether ``profile``'s tbf burst is smaller than the installed one (1 % slack: the kernel keeps it in ticks)."""
    bucket = profile_bucket(profile, kernel=True)
    return root.burst_bytes is None or bucket is None or bucket.burst_bytes < 0.99 * root.burst_bytes


def set_offloads(dev: str, netns: str | None = None, *, enable: bool = False, runner: Runner = run_cmd) -> str:
    """Switch TSO/GSO/GRO of ``dev`` off (or on) with ethtool; returns a sentence saying what happened.

    Off keeps 64 KB GSO super-packets from passing the shaper as one unit, so
    shaping is smooth at packet scale; the price is much more CPU per byte (see
    the package docstring for what that cost on 2 cores).
    """
    if shutil.which("ethtool") is None:
        return ("ethtool not installed: TSO/GSO/GRO left as they were (rates stay right on average; "
                "super-packets make the shaping burstier)")
    state = "on" if enable else "off"
    r = runner(offload_commands(dev, enable)[0], netns, check=False)
    if r.returncode != 0:
        return f"ethtool could not switch all of {'/'.join(OFFLOAD_FEATURES)} {state}: {(r.stderr or r.stdout).strip()}"
    return f"{'/'.join(OFFLOAD_FEATURES)} {state}"


def apply(dev: str, profile: LinkProfile, netns: str | None = None, *, choice: BackendChoice | None = None,
          available: frozenset[str] | None = None, privileged: bool | None = None, ifb_dev: str | None = None,
          offloads: Literal["off", "keep"] = "keep", runner: Runner = run_cmd) -> Applied:
    """Shape ``dev`` (in ``netns``) per ``profile``; idempotent, verified by reading tc back.

    The backend is ``choice`` or :func:`choose_backend` on the detected kernel.
    With a kernel backend: egress on ``dev`` and/or ingress through ``ifb_dev``
    (default :func:`ifb_name_for`), per ``profile.direction``; a direction the
    profile does not shape is cleared. With ``app``/``none`` any kernel shaping
    on ``dev`` is cleared (when privileged) and the returned :class:`Applied`
    says what the transport must do. ``offloads="off"`` also switches TSO/GSO/GRO
    off on ``dev`` (``Applied.offloads`` says what happened). Raises
    :class:`ShapingError` when a command fails or the read-back differs.
    """
    if privileged is None:
        privileged = has_net_admin()
    if choice is None:
        if available is None:
            available = detect_backends() if privileged else frozenset()
        choice = choose_backend(profile, available, privileged)
    ifb = ifb_dev or ifb_name_for(dev)
    result = Applied(dev=dev, netns=netns, profile=profile, choice=choice)
    if not choice.kernel:
        if privileged and (runner is not run_cmd or not iproute2_missing()):
            result.commands = clear(dev, netns, ifb_dev=ifb, runner=runner)
        return result
    backend = choice.backend
    if profile.shapes_egress:
        _install(dev, profile, backend, egress_commands(dev, profile, backend), netns, runner, result.commands)
    else:
        _clear_root(dev, netns, runner, result.commands)
    if profile.shapes_ingress and "ingress" not in choice.left_to_app:
        if not link_exists(ifb, netns, runner=runner):
            _run_all(ifb_create_commands(ifb), netns, runner, result.commands)
        redirect = ingress_commands(dev, ifb, profile, backend)
        n_shape = len(egress_commands(ifb, profile, backend))
        _run_all(redirect[:-n_shape], netns, runner, result.commands)
        _install(ifb, profile, backend, redirect[-n_shape:], netns, runner, result.commands)
        result.ifb_dev = ifb
    else:
        _clear_ingress(dev, ifb, netns, runner, result.commands)
    if offloads == "off":
        result.offloads = set_offloads(dev, netns, runner=runner)
    else:
        result.offloads = "offloads kept as they were (offloads='keep')"
    problems = []
    if profile.shapes_egress:
        result.egress = read_qdiscs(dev, netns, runner=runner)
        problems += [f"{dev} egress: {p}" for p in
                     verify(profile, backend, result.egress, read_classes(dev, netns, runner=runner))]
    if result.ifb_dev:
        result.ingress = read_qdiscs(ifb, netns, runner=runner)
        problems += [f"{dev} ingress ({ifb}): {p}" for p in
                     verify(profile, backend, result.ingress, read_classes(ifb, netns, runner=runner))]
    if problems:
        raise ShapingError("shaping did not read back as applied: " + "; ".join(problems))
    return result


def _clear_root(dev: str, netns: str | None, runner: Runner, log: list[list[str]]) -> None:
    qdiscs = read_qdiscs(dev, netns, runner=runner)
    if any(q.is_root and not q.is_default for q in qdiscs):
        _run_all(clear_commands(dev, root=True, ingress=False), netns, runner, log)


def _clear_ingress(dev: str, ifb: str | None, netns: str | None, runner: Runner, log: list[list[str]]) -> None:
    qdiscs = read_qdiscs(dev, netns, runner=runner)
    has_ingress = any(q.kind == "ingress" for q in qdiscs)
    ifb_there = bool(ifb) and link_exists(ifb, netns, runner=runner)
    _run_all(clear_commands(dev, ifb if ifb_there else None, root=False, ingress=has_ingress), netns, runner, log)


def clear(dev: str, netns: str | None = None, *, ifb_dev: str | None = None,
          runner: Runner = run_cmd) -> list[list[str]]:
    """Remove the shaping :func:`apply` installs on ``dev``: root qdisc, ingress qdisc, the ifb device.

    Idempotent: only what is there is removed, so clearing an unshaped device does
    nothing. Returns the commands it ran. A missing ``dev`` raises :class:`TcError`.
    """
    log: list[list[str]] = []
    _clear_root(dev, netns, runner, log)
    _clear_ingress(dev, ifb_dev or ifb_name_for(dev), netns, runner, log)
    return log
