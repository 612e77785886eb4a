"""What the kernel offers for shaping (probed by trying it) and which backend a profile gets.

:func:`detect_backends` probes every time it is called; whoever needs the answer
more than once keeps it (a ``NetnsCluster`` keeps the set it detected for all
its nodes, the launcher writes the chosen backend into the spec) and passes it
on as ``available``.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from synclab.linkprofile import LinkProfile
from synclab.netem.tc.commands import ROOT_HANDLE, ifb_create_commands, ingress_redirect_commands
from synclab.netem.tc.runner import Runner, ShapingError, run_cmd

Backend = Literal["netem", "htb", "tbf", "app", "none"]
KERNEL_FEATURES = ("netem", "htb", "tbf", "ifb")
# Preference order for rate-only shaping, measured side by side on a 2-core host (CHANGELOG.md, "Link accuracy"):
# tbf and htb are equally accurate up to 1 Gbit/s; above, htb kept closer to the rate (2 Gbit/s:
# 0.962 vs 0.938 and 0.942 vs 0.870 of the rate on two machines), so it goes first there.
RATE_BACKENDS = ("tbf", "htb")
HIGH_RATE_BACKENDS = ("htb", "tbf")
HIGH_RATE_BPS = 1_000_000_000
PROBE_PREFIX = "slbprobe"


def rate_backend_order(rate_bps: int | None) -> tuple[str, ...]:
    """The default order in which rate shapers are tried: tbf first up to 1 Gbit/s, htb above."""
    return HIGH_RATE_BACKENDS if rate_bps is not None and rate_bps > HIGH_RATE_BPS else RATE_BACKENDS


def has_net_admin() -> bool:
    """True when this process holds CAP_NET_ADMIN (root normally does; a container may not)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << 12))
    except OSError:
        pass
    return os.geteuid() == 0


def iproute2_missing() -> list[str]:
    """The iproute2 tools not on PATH (empty when ``ip`` and ``tc`` are both there)."""
    return [t for t in ("ip", "tc") if shutil.which(t) is None]


def detect_backends(*, runner: Runner | None = None) -> frozenset[str]:
    """Which of netem, htb, tbf and ifb the kernel offers, by trying them for real.

    Each qdisc is added to one end of a veth pair inside a throwaway network
    namespace (removed afterwards); ``ifb`` means an ifb device, an ingress qdisc
    and a u32 mirred redirect all work. Nothing is cached: keep the answer where
    it is needed again. With the default runner and without CAP_NET_ADMIN or
    iproute2, nothing can be used and the answer is the empty set.
    """
    if runner is None:
        if not has_net_admin() or iproute2_missing():
            return frozenset()
        runner = run_cmd
    ns = f"{PROBE_PREFIX}{os.getpid()}"
    found: set[str] = set()
    runner(["ip", "netns", "add", ns])
    try:
        runner(["ip", "link", "add", "slbpa", "type", "veth", "peer", "name", "slbpb"], ns)
        runner(["ip", "link", "set", "dev", "slbpa", "up"], ns)
        trials = {"netem": ["netem", "delay", "1ms"],
                  "tbf": ["tbf", "rate", "1mbit", "burst", "65536", "limit", "131072"],
                  "htb": ["htb", "default", "1"]}
        for kind, args in trials.items():
            r = runner(["tc", "qdisc", "replace", "dev", "slbpa", "root", "handle", ROOT_HANDLE, *args], ns,
                       check=False)
            if r.returncode == 0:
                found.add(kind)
                runner(["tc", "qdisc", "del", "dev", "slbpa", "root"], ns, check=False)
        ifb_steps = [ifb_create_commands("slbpi")[0], ["ip", "link", "set", "dev", "slbpi", "up"],
                     *ingress_redirect_commands("slbpa", "slbpi")]
        if all(runner(c, ns, check=False).returncode == 0 for c in ifb_steps):
            found.add("ifb")
    finally:
        runner(["ip", "netns", "del", ns], check=False)
    return frozenset(found)


@dataclass(frozen=True)
class BackendChoice:
    """The backend for one profile and what it leaves undone.

    ``left_to_app`` names the parts of the profile the kernel will not apply —
    any of ``rate``, ``delay``, ``jitter``, ``loss`` and ``ingress`` (shaping of
    the receive direction) — so the caller emulates them in the transport or
    refuses the run with :meth:`require_kernel`; they are never dropped silently.
    """

    backend: Backend
    left_to_app: frozenset[str] = frozenset()
    reason: str = ""

    @property
    def kernel(self) -> bool:
        return self.backend in ("netem", "htb", "tbf")

    def require_kernel(self) -> None:
        """Raise :class:`ShapingError` when anything is left to the app (for callers that cannot emulate it)."""
        if self.left_to_app:
            raise ShapingError(f"backend {self.backend} cannot apply {', '.join(sorted(self.left_to_app))}: "
                               f"{self.reason}")


def _requested(profile: LinkProfile) -> set[str]:
    asked = {k for k, v in (("rate", profile.rate_bps), ("delay", profile.delay_s), ("jitter", profile.jitter_s),
                            ("loss", profile.loss_pct)) if v}
    if profile.shapes_ingress and asked:
        asked.add("ingress")
    return asked


def choose_backend(profile: LinkProfile, available: frozenset[str] | set[str], privileged: bool, *,
                   prefer: Sequence[str] | None = None) -> BackendChoice:
    """Pick the backend for ``profile`` given the kernel's ``available`` features and privileges.

    netem when the profile has delay/jitter/loss and the kernel has it (with htb
    for the rate); else the first of ``prefer`` (default :func:`rate_backend_order`) for the rate, leaving
    delay/jitter/loss to the app; else ``app``. Ingress needs ``ifb``; without it
    ``ingress`` is left to the app. To simulate a kernel without netem, pass
    ``available - {"netem"}``.
    """
    asked = _requested(profile)
    if not asked:
        return BackendChoice("none", frozenset(), "the profile shapes nothing")
    if not privileged:
        return BackendChoice("app", frozenset(asked), "no CAP_NET_ADMIN: the kernel cannot be asked to shape")
    impair = asked & {"delay", "jitter", "loss"}
    has_ifb = "ifb" in available
    direction_left = {"ingress"} & asked if not has_ifb else set()
    if profile.direction == "ingress" and not has_ifb:
        return BackendChoice("app", frozenset(asked), "ingress shaping needs an ifb device; the kernel has none")
    if impair and "netem" in available and (profile.rate_bps is None or "htb" in available):
        why = "netem for delay/jitter/loss" + (", htb for the rate" if profile.rate_bps else "")
        return BackendChoice("netem", frozenset(direction_left), why + _ingress_note(direction_left))
    if profile.rate_bps is not None:
        for name in prefer or rate_backend_order(profile.rate_bps):
            if name in available:
                why = f"{name} for the rate"
                if impair:
                    why += (f"; {', '.join(sorted(impair))} left to the transport "
                            "(the kernel has no sch_netem)" if "netem" not in available else
                            f"; {', '.join(sorted(impair))} left to the transport")
                return BackendChoice(name, frozenset(impair | direction_left), why + _ingress_note(direction_left))
    return BackendChoice("app", frozenset(asked),
                         f"the kernel offers none of the qdiscs this profile needs (has: "
                         f"{', '.join(sorted(available)) or 'nothing'})")


def _ingress_note(left: set[str]) -> str:
    return "; ingress left to the transport (no ifb)" if left else ""
