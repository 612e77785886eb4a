"""How busy the emulator's host was while a run was measured (Linux ``/proc/stat``): a saturation check.

The emulator runs every node on one host, so its figures are the links' only while the host has CPU to
spare. Issue 14 found where it has not: 8 ring workers on the 2-core VM kept it 175 % busy (``time -v``), their
ring steps took 1.5x the wire time against 1.05x at 2 and 4 workers, and the simulator (which gives every node
its own CPU) came out 23 % faster. :func:`sample` reads the host-wide counters — every process's time, not only
this job's, as the kernel counts it — and :func:`between` turns two samples into the busy fraction of all cores
and the context switches per second. A sample is None where there is no ``/proc/stat`` (the field is then
left out, not faked).
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass

_TICK_S = 1.0 / os.sysconf("SC_CLK_TCK")
STAT = "/proc/stat"
SATURATED = 0.9  # a busy fraction from which a run's figures are the host's as much as the links'


@dataclass(frozen=True)
class CpuSample:
    at: float          # time.time() when read
    busy_s: float      # all cores' non-idle seconds since boot (user, nice, system, irq, softirq, steal)
    total_s: float     # all cores' seconds since boot, idle and iowait included
    ctxt: int          # context switches since boot
    cores: int


def parse(text: str, at: float) -> CpuSample:
    """One :class:`CpuSample` from the text of ``/proc/stat`` (its ``cpu`` and ``ctxt`` lines)."""
    cpu = ctxt = None
    cores = 0
    for line in text.splitlines():
        head, _, rest = line.partition(" ")
        if head == "cpu":
            cpu = [int(v) for v in rest.split()]
        elif head.startswith("cpu") and head[3:].isdigit():
            cores += 1
        elif head == "ctxt":
            ctxt = int(rest)
    if cpu is None or ctxt is None or len(cpu) < 5:
        raise ValueError(f"{STAT}: no 'cpu' line with idle and iowait, or no 'ctxt' line")
    # user nice system idle iowait irq softirq steal [guest guest_nice: already inside user and nice]
    counted = cpu[:8]
    idle = counted[3] + counted[4]
    total = sum(counted)
    return CpuSample(at=at, busy_s=(total - idle) * _TICK_S, total_s=total * _TICK_S, ctxt=ctxt, cores=max(cores, 1))


def sample(path: str = STAT) -> CpuSample | None:
    """The host's counters now, or None where ``path`` cannot be read (not Linux, a restricted sandbox)."""
    try:
        with open(path) as f:
            return parse(f.read(), time.time())
    except (OSError, ValueError):
        return None


def between(a: CpuSample | None, b: CpuSample | None) -> dict | None:
    """The host from sample ``a`` to ``b``: ``busy_fraction`` of all cores, ``context_switches_per_s``,
    ``cores``, ``seconds``, ``saturated`` (busy ≥ :data:`SATURATED`); None without two samples or time between."""
    if a is None or b is None or b.total_s <= a.total_s or b.at <= a.at:
        return None
    busy = (b.busy_s - a.busy_s) / (b.total_s - a.total_s)
    return {"busy_fraction": round(busy, 4), "cores": b.cores, "seconds": round(b.at - a.at, 3),
            "context_switches_per_s": round((b.ctxt - a.ctxt) / (b.at - a.at), 1), "saturated": busy >= SATURATED}
