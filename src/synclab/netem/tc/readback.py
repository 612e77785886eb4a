"""Reading the installed qdiscs and classes back from ``tc -j`` and checking them against a profile.

``tc -j`` prints rates in bytes/s, bursts and limits in bytes (netem's limit in
packets), netem's delay and jitter in seconds and its loss as a fraction; the
readers turn them into base units in the names (``rate_bps`` in bits/s). tbf
shows its latency rather than its limit, so a tbf's limit reads as None.

One exception: iproute2 before 6.2 (Debian bookworm ships 6.1) ignores ``-j``
for ``tc class show`` and prints its human form. For that case
:func:`parse_classes` reads the few words it needs (kind, classid, parent,
``rate``, ``ceil``) from each class line, converting rates with the project's
one unit parser (tc prints them as ``2Gbit``, ``123456Kbit``: decimal prefixes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from synclab.linkprofile import LinkProfile, format_duration, format_rate
from synclab.netem.tc.commands import HTB_CLASS, ROOT_HANDLE, root_kind
from synclab.netem.tc.runner import Runner, run_cmd
from synclab.units import parse_rate_bps

RATE_TOLERANCE = 0.002  # the kernel keeps whole bytes/s, and tc < 6.2 prints class rates rounded (123456Kbit)


@dataclass(frozen=True)
class Qdisc:
    """One qdisc of ``tc -j qdisc show``, or one class of ``tc class show`` (``kind`` 'htb', ``handle`` the classid)."""

    kind: str
    handle: str
    parent: str  # "root" or the parent's handle
    rate_bps: int | None = None
    ceil_bps: int | None = None
    burst_bytes: int | None = None
    limit: int | None = None  # bytes (tbf, bfifo) or packets (netem, pfifo)
    delay_s: float | None = None
    jitter_s: float | None = None
    loss_pct: float | None = None
    sent_bytes: int = 0
    sent_packets: int = 0
    dropped: int = 0
    overlimits: int = 0
    backlog_bytes: int = 0

    @property
    def is_root(self) -> bool:
        return self.parent == "root"

    @property
    def is_default(self) -> bool:
        """The kernel's own root (noqueue, pfifo_fast, mq ... with handle 0:); it cannot be deleted."""
        return self.handle in ("0:", "0")


def _bits(bytes_per_s: Any) -> int | None:
    return None if bytes_per_s is None else int(bytes_per_s) * 8


def _entry(item: dict[str, Any], kind_key: str) -> Qdisc:
    opts = item.get("options", item)  # qdiscs nest their options; classes (iproute2 >= 6.2) do not
    delay = opts.get("delay") if isinstance(opts.get("delay"), dict) else {}
    loss = opts.get("loss-random", {})
    parent = "root" if item.get("root") else item.get("parent", "?")
    return Qdisc(kind=item[kind_key], handle=item["handle"], parent=parent,
                 rate_bps=_bits(opts.get("rate")), ceil_bps=_bits(opts.get("ceil")), burst_bytes=opts.get("burst"),
                 limit=opts.get("limit"), delay_s=delay.get("delay"), jitter_s=delay.get("jitter") or None,
                 loss_pct=None if "loss" not in loss else 100 * loss["loss"],
                 sent_bytes=item.get("bytes", 0), sent_packets=item.get("packets", 0), dropped=item.get("drops", 0),
                 overlimits=item.get("overlimits", 0), backlog_bytes=item.get("backlog", 0))


def parse_qdiscs(text: str) -> list[Qdisc]:
    """The qdiscs in the output of ``tc -j [-s] qdisc show dev X``."""
    return [_entry(item, "kind") for item in json.loads(text or "[]")]


def _class_line(line: str) -> Qdisc:
    words = line.split()
    after = {w: words[i + 1] for i, w in enumerate(words[:-1])}
    rate, ceil = after.get("rate"), after.get("ceil")
    return Qdisc(kind=words[1], handle=words[2], parent="root" if "root" in words[3:5] else after.get("parent", "?"),
                 rate_bps=None if rate is None else parse_rate_bps(rate, "tc class rate"),
                 ceil_bps=None if ceil is None else parse_rate_bps(ceil, "tc class ceil"))


def parse_classes(text: str) -> list[Qdisc]:
    """The classes in the output of ``tc -j class show dev X``: JSON (iproute2 >= 6.2) or class lines (before)."""
    if text.lstrip().startswith("["):
        return [_entry(item, "class") for item in json.loads(text)]
    return [_class_line(line) for line in text.splitlines() if line.startswith("class ")]


def read_qdiscs(dev: str, netns: str | None = None, *, runner: Runner = run_cmd) -> list[Qdisc]:
    """The qdiscs on ``dev`` (in ``netns``), with their counters."""
    return parse_qdiscs(runner(["tc", "-j", "-s", "qdisc", "show", "dev", dev], netns).stdout)


def read_classes(dev: str, netns: str | None = None, *, runner: Runner = run_cmd) -> list[Qdisc]:
    """The classes on ``dev`` (htb's rate lives on its class)."""
    return parse_classes(runner(["tc", "-j", "class", "show", "dev", dev], netns).stdout)


def link_exists(dev: str, netns: str | None = None, *, runner: Runner = run_cmd) -> bool:
    return runner(["ip", "link", "show", "dev", dev], netns, check=False).returncode == 0


def _close(a: float, b: float, rel: float) -> bool:
    return abs(a - b) <= rel * max(abs(a), abs(b)) + 1000


def verify(profile: LinkProfile, backend: str, qdiscs: Sequence[Qdisc], classes: Sequence[Qdisc] = ()) -> list[str]:
    """What differs between the shaping ``egress_commands`` asked for and the read-back (empty when equal)."""
    kind = root_kind(profile, backend)
    roots = [q for q in qdiscs if q.is_root]
    root = roots[0] if roots else None
    if kind is None:
        return [f"root qdisc {root.kind} {root.handle} still installed"] if root and not root.is_default else []
    if root is None or root.kind != kind or root.handle != ROOT_HANDLE:
        return [f"root qdisc is {root.kind + ' ' + root.handle if root else 'missing'}, expected {kind} {ROOT_HANDLE}"]
    problems = []
    rate = profile.rate_bps
    if kind == "tbf":
        if root.rate_bps is None or rate is None or not _close(root.rate_bps, rate, RATE_TOLERANCE):
            problems.append(f"tbf rate reads {format_rate(root.rate_bps)}, expected {format_rate(rate)}")
    if kind == "htb":
        cls = next((c for c in classes if c.handle == HTB_CLASS), None)
        if cls is None:
            problems.append(f"htb class {HTB_CLASS} missing")
        elif rate is None or cls.rate_bps is None or not _close(cls.rate_bps, rate, RATE_TOLERANCE) \
                or cls.ceil_bps is None or not _close(cls.ceil_bps, rate, RATE_TOLERANCE):
            problems.append(f"htb class rate/ceil read {format_rate(cls.rate_bps)}/{format_rate(cls.ceil_bps)}, "
                            f"expected {format_rate(rate)}")
    if backend == "netem":
        nq = next((q for q in qdiscs if q.kind == "netem"), None)
        if nq is None:
            problems.append("netem qdisc missing")
        else:
            if profile.delay_s and (nq.delay_s is None or abs(nq.delay_s - profile.delay_s) > 1e-4):
                problems.append(f"netem delay reads {nq.delay_s}, expected {format_duration(profile.delay_s)}")
            if profile.loss_pct and (nq.loss_pct is None or abs(nq.loss_pct - profile.loss_pct) > 1e-3):
                problems.append(f"netem loss reads {nq.loss_pct}%, expected {profile.loss_pct:g}%")
    return problems
