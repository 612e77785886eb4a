"""Pure tc/ip/ethtool command builders: they return argv lists and run nothing (tested without root)."""

from __future__ import annotations

import math

from synclab.linkprofile import LinkProfile
from synclab.transport.shaper import Bucket, profile_bucket

ROOT_HANDLE = "1:"
HTB_CLASS = "1:1"
LEAF_HANDLE = "10:"
INGRESS_HANDLE = "ffff:"
FILTER_HANDLE = "800::800"  # a fixed u32 handle makes `tc filter replace` idempotent
MTU_FRAME_BYTES = 1514
NETEM_UNLIMITED_PKTS = 100_000  # netem without a rate: room for 20 ms of ~50 Gbit/s
OFFLOAD_FEATURES = ("tso", "gso", "gro")
KERNEL_BACKENDS = ("netem", "htb", "tbf")
HTB_MAX_QUANTUM = 200_000


def _bits(rate_bps: int) -> str:
    return f"{rate_bps}bit"


def _usecs(s: float) -> str:
    return f"{round(s * 1e6)}us"


def htb_quantum_bytes_for(rate_bps: int) -> int:
    """htb's DRR quantum: rate/10 bytes (r2q = 10), kept inside [1600, 200 000] so tc does not warn."""
    return min(HTB_MAX_QUANTUM, max(1600, rate_bps // 8 // 10))


def delay_line_bytes_for(rate_bps: int, delay_s: float, jitter_s: float) -> int:
    """What a kernel delay line (netem) holds at full rate, doubled: 2 × rate × (delay + jitter)."""
    return int(2 * rate_bps / 8 * (delay_s + jitter_s))


def _kernel_bucket(profile: LinkProfile) -> Bucket:
    bucket = profile_bucket(profile, kernel=True)
    assert bucket is not None, "a rate shaper needs a rate"
    return bucket


def root_kind(profile: LinkProfile, backend: str) -> str | None:
    """The root qdisc kind :func:`egress_commands` installs (None when it installs nothing)."""
    if backend == "tbf":
        return "tbf"
    if backend == "htb" or (backend == "netem" and profile.rate_bps is not None):
        return "htb"
    if backend == "netem":
        return "netem"
    return None


def _htb_commands(dev: str, profile: LinkProfile) -> list[list[str]]:
    rate = profile.rate_bps
    assert rate is not None
    burst = str(_kernel_bucket(profile).burst_bytes)
    return [
        ["tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT_HANDLE, "htb", "default", "1"],
        ["tc", "class", "replace", "dev", dev, "parent", ROOT_HANDLE, "classid", HTB_CLASS, "htb",
         "rate", _bits(rate), "ceil", _bits(rate), "burst", burst, "cburst", burst,
         "quantum", str(htb_quantum_bytes_for(rate))],
    ]


def netem_args(profile: LinkProfile) -> list[str]:
    """The ``netem ...`` arguments for ``profile``'s delay, jitter and loss, with a limit that holds its delay line."""
    args = ["netem"]
    if profile.delay_s:
        args += ["delay", _usecs(profile.delay_s)]
        if profile.jitter_s:
            args.append(_usecs(profile.jitter_s))
    if profile.loss_pct:
        args += ["loss", f"{profile.loss_pct:g}%"]
    if profile.rate_bps is None:
        limit = NETEM_UNLIMITED_PKTS
    else:
        held = (_kernel_bucket(profile).queue_bytes
                + delay_line_bytes_for(profile.rate_bps, profile.delay_s, profile.jitter_s))
        limit = max(1000, math.ceil(held / MTU_FRAME_BYTES))
    return args + ["limit", str(limit)]


def egress_commands(dev: str, profile: LinkProfile, backend: str) -> list[list[str]]:
    """The tc commands that shape ``dev``'s outgoing traffic per ``profile`` with ``backend``.

    All use ``replace`` so running them again is harmless (changing the *kind* of
    the root qdisc needs a :func:`clear_commands` first; ``apply`` does that).
    ``app``/``none`` need no kernel commands.
    """
    if backend in ("app", "none"):
        return []
    if backend not in KERNEL_BACKENDS:
        raise ValueError(f"unknown backend {backend!r}")
    rate = profile.rate_bps
    if backend in ("tbf", "htb") and rate is None:
        raise ValueError(f"backend {backend} shapes the rate, and the profile has none")
    if backend == "tbf":
        assert rate is not None
        bucket = _kernel_bucket(profile)
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT_HANDLE, "tbf",
                 "rate", _bits(rate), "burst", str(bucket.burst_bytes), "limit", str(bucket.queue_bytes)]]
    if backend == "htb":
        return _htb_commands(dev, profile) + [
            ["tc", "qdisc", "replace", "dev", dev, "parent", HTB_CLASS, "handle", LEAF_HANDLE, "bfifo",
             "limit", str(_kernel_bucket(profile).queue_bytes)]]
    if rate is None:
        return [["tc", "qdisc", "replace", "dev", dev, "root", "handle", ROOT_HANDLE, *netem_args(profile)]]
    return _htb_commands(dev, profile) + [
        ["tc", "qdisc", "replace", "dev", dev, "parent", HTB_CLASS, "handle", LEAF_HANDLE, *netem_args(profile)]]


def ifb_name_for(dev: str) -> str:
    """The ifb device that carries ``dev``'s ingress: 'ifb' + dev, cut to 15 characters."""
    return ("ifb" + dev)[:15]


def ifb_create_commands(ifb_dev: str) -> list[list[str]]:
    """Create the ifb device (not idempotent: ``apply`` runs it only when the device is missing)."""
    return [["ip", "link", "add", "name", ifb_dev, "type", "ifb"]]


def ingress_redirect_commands(dev: str, ifb_dev: str) -> list[list[str]]:
    """An ingress qdisc on ``dev`` and a match-all u32 filter redirecting everything to ``ifb_dev``."""
    return [
        ["tc", "qdisc", "replace", "dev", dev, "handle", INGRESS_HANDLE, "ingress"],
        ["tc", "filter", "replace", "dev", dev, "parent", INGRESS_HANDLE, "protocol", "all", "prio", "1",
         "handle", FILTER_HANDLE, "u32", "match", "u32", "0", "0",
         "action", "mirred", "egress", "redirect", "dev", ifb_dev],
    ]


def ingress_commands(dev: str, ifb_dev: str, profile: LinkProfile, backend: str) -> list[list[str]]:
    """Shape ``dev``'s incoming traffic: redirect its ingress to ``ifb_dev`` and shape that ifb's egress.

    The ifb device must exist (:func:`ifb_create_commands`). Empty for ``app``/``none``.
    """
    if backend in ("app", "none"):
        return []
    return [["ip", "link", "set", "dev", ifb_dev, "up"], *ingress_redirect_commands(dev, ifb_dev),
            *egress_commands(ifb_dev, profile, backend)]


def clear_commands(dev: str, ifb_dev: str | None = None, *, root: bool = True,
                   ingress: bool = True) -> list[list[str]]:
    """Remove ``dev``'s root qdisc (back to the kernel default), its ingress qdisc and the ifb device.

    tc refuses to delete what is not there, so ``clear`` asks for only what it
    found; this function returns whatever the flags ask for.
    """
    cmds = []
    if root:
        cmds.append(["tc", "qdisc", "del", "dev", dev, "root"])
    if ingress:
        cmds.append(["tc", "qdisc", "del", "dev", dev, "ingress"])
    if ifb_dev:
        cmds.append(["ip", "link", "del", "dev", ifb_dev])
    return cmds


def offload_commands(dev: str, enable: bool = False) -> list[list[str]]:
    """ethtool command switching TSO, GSO and GRO of ``dev`` off (or on)."""
    state = "on" if enable else "off"
    cmd = ["ethtool", "-K", dev]
    for f in OFFLOAD_FEATURES:
        cmd += [f, state]
    return [cmd]
