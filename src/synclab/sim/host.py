"""The emulator's host as part of the simulated network (opt-in: a real cluster has a CPU per node).

* Optionally (:class:`HostCpu`, off by default: a real cluster has a CPU per
  node), the one host the emulator runs every node on: its cores are one more
  shared resource every flow crosses, as the data plane spends CPU seconds per
  byte moved (serialization, gRPC, reassembly, the ring's add). A flow at rate r
  draws r·c/8 cores (c CPU seconds per byte); the cores are shared max-min fairly
  with the NICs, i.e. the host is one more bottleneck of capacity cores·8/c bit/s.
  Part of that cost is not overlapped with the wire: the receiver reassembles a
  message (and the ring adds it) only once its last byte is in, and the next ring
  step waits for that (store and forward). That part (``serial_s_per_byte`` of c)
  is a job on the host's cores once the message is through, before it is
  delivered: :class:`CpuServer`, processor sharing, one core at most per job.
  The start-up ``a`` is the host's too (the emulator's per-message cost is its
  processes' CPU time: the fit's a grows with the process count on the same
  cores): with the host modelled it is a job of the same server, so concurrent
  start-ups share the cores. Measured per dilation (2026-11-26,
  ``synclab calibrate startup``): the ring's per-message start-up is
  the same host time at D = 1 to 8, i.e. 1/D of it on the emulated clock.
* With the host modelled, the all-reduce strategies' per-tensor runtime work beside the ring (hand-over to
  the communication thread, events, the replayed update's call, the gate: ``HostCpu.tensor_s``, measured by
  ``synclab calibrate tensor-cost``) is a job of the same cores after each tensor's all-reduce
  (:meth:`Network.tensor_job`; 2026-11-26).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

Callback = Callable[[], None]


def goodput_at(points: list[tuple[int, float]], segment: int) -> float:
    """The share at a ring segment of ``segment`` bytes: linear in log(segment) between the measured segment
    sizes, the nearest measured share outside them (a size-free entry, segment 0, holds at every size);
    1.0 without points."""
    if not points:
        return 1.0
    if len(points) == 1 or segment <= points[0][0]:
        return points[0][1]
    for (s0, g0), (s1, g1) in itertools.pairwise(points):
        if segment <= s1:
            w = math.log(segment / s0) / math.log(s1 / s0)
            return g0 + w * (g1 - g0)
    return points[-1][1]


class HostCpu:
    """The emulator's host CPU as a shared resource of the simulated network (a measured effect, opt-in).

    ``cores`` CPU cores shared by all nodes (the emulator runs every node on one host); every byte a
    flow moves costs ``cpu_s_per_byte`` CPU seconds of that host (sender and receiver together).
    ``dilation`` is the emulator's time dilation D: the host runs D× slower than the emulated clock, so
    a host CPU second is 1/D emulated seconds and the host carries D× the emulated bytes per CPU
    second. ``mirrored`` flows stand for that many identical concurrent flows (the ring's ranks
    simulated once, :func:`synclab.sim.nodes.ring_allreduce`): each simulated flow then draws that many
    times its bytes' CPU. Capacity, in emulated bit/s of the flows crossing it:
    cores · D · 8 / (cpu_s_per_byte · mirrored).
    """

    def __init__(self, cores: float, cpu_s_per_byte: float, *, serial_s_per_byte: float = 0.0,
                 dilation: float = 1.0, mirrored: int = 1, tensor_s: float = 0.0,
                 ring_goodput: float | list[tuple[int, float]] = 1.0):
        if cores <= 0:
            raise ValueError(f"host cores must be > 0, got {cores}")
        if cpu_s_per_byte <= 0:
            raise ValueError(f"CPU seconds per byte must be > 0, got {cpu_s_per_byte}")
        if not 0 <= serial_s_per_byte <= cpu_s_per_byte:
            raise ValueError(f"serial CPU seconds per byte must be in [0, {cpu_s_per_byte}] (the total), "
                             f"got {serial_s_per_byte}")
        if dilation < 1:
            raise ValueError(f"dilation must be >= 1, got {dilation}")
        if mirrored < 1:
            raise ValueError(f"mirrored must be >= 1, got {mirrored}")
        if not tensor_s >= 0:
            raise ValueError(f"host seconds per tensor must be >= 0, got {tensor_s}")
        self.cores, self.cpu_s_per_byte, self.dilation, self.mirrored = cores, cpu_s_per_byte, dilation, mirrored
        self.serial_s_per_byte = serial_s_per_byte
        self.tensor_s = tensor_s  # the worker runtime's host seconds per tensor beside the ring (Network.tensor_job)
        # the share of the link's TCP goodput the emulator's ring reaches at this world size, measured alone
        # (benchmarks/allreduce_vs_gloo.py; synclab.sim.run.ring_goodput_for): one share, or (segment bytes,
        # share) points (goodput_at); ring segments take 1/share longer
        points = [(0, float(ring_goodput))] if isinstance(ring_goodput, (int, float)) else list(ring_goodput)
        if not all(0 < g <= 1 for _, g in points):
            raise ValueError(f"ring goodput must be in (0, 1], got {ring_goodput}")
        self._goodput = sorted(points)

    @property
    def ring_goodput(self) -> float | list[list[float]]:
        """The goodput as recorded: the one share of a size-free table (1 when empty), else [segment, share] pairs."""
        sized = [list(p) for p in self._goodput if p[0] > 0]
        return sized or goodput_at(self._goodput, 0)

    def ring_share(self, segment: int) -> float:
        """The ring's measured goodput share at a segment of ``segment`` bytes (:func:`goodput_at`)."""
        return goodput_at(self._goodput, segment)

    @property
    def capacity_bps(self) -> float:
        """What the flows crossing the host may carry together (emulated bit/s): the overlapped share."""
        overlapped = self.cpu_s_per_byte - self.serial_s_per_byte
        return float("inf") if overlapped <= 0 else self.cores * self.dilation * 8.0 / (overlapped * self.mirrored)

    def as_dict(self) -> dict:
        return {"cores": self.cores, "cpu_s_per_byte": self.cpu_s_per_byte,
                "serial_s_per_byte": self.serial_s_per_byte, "dilation": self.dilation,
                "ring_goodput": self.ring_goodput, "mirrored": self.mirrored, "capacity_bps": self.capacity_bps,
                "tensor_s": self.tensor_s}


class CpuServer:
    """The host's cores as a processor-sharing server of jobs (emulated seconds of one core's work).

    n jobs of weight w_i (a mirrored job stands for w identical ones) each run at
    min(1, cores / Σw) of a core: alone, or with fewer jobs than cores, a job takes
    its work; with more, all slow down alike. Rates are recomputed on every arrival
    and departure (processor sharing, Kleinrock).
    """

    # synclab.sim.network.Network: network imports this module, so the name stays a string here
    def __init__(self, net: "Network", cores: float):  # noqa: F821
        self.net, self.cores = net, cores
        self.jobs: dict[int, list] = {}  # id -> [work_left_s, weight, on_done]
        self._ids = itertools.count()
        self._t = 0.0
        self._version = 0

    def _rate(self) -> float:
        total = sum(j[1] for j in self.jobs.values())
        return min(1.0, self.cores / total) if total else 0.0

    def _advance(self) -> None:
        now = self.net.env.now
        r = self._rate()
        for j in self.jobs.values():
            j[0] = max(0.0, j[0] - r * (now - self._t))
        self._t = now

    def submit(self, work_s: float, on_done: Callback, weight: int = 1) -> None:
        if work_s <= 0:
            on_done()
            return
        self._advance()
        self.jobs[next(self._ids)] = [work_s, weight, on_done]
        self._schedule()

    def _schedule(self) -> None:
        self._version += 1
        if not self.jobs:
            return
        v, r = self._version, self._rate()
        jid, job = min(self.jobs.items(), key=lambda kv: (kv[1][0], kv[0]))
        self.net.events += 1
        ev = self.net.env.timeout(job[0] / r)
        ev.callbacks.append(lambda _: self._finish(jid, v))

    def _finish(self, jid: int, version: int) -> None:
        if version != self._version:
            return  # superseded by an arrival
        self._advance()
        _, _, on_done = self.jobs.pop(jid)
        self._schedule()
        on_done()
