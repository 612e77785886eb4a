"""The simulated network's fabric: NICs as shared resources and fluid flows over them.

The network is three modules: this fabric, the senders' queues (:mod:`synclab.sim.link`)
and the optional model of the emulator's host (:mod:`synclab.sim.host`).

Model (the same picture as the emulator's transport over tc-shaped links):

* Every node has an egress NIC and an ingress NIC, each with the rate its link
  profile gives that direction (``None``: not shaped, unlimited).
* A *flow* moves bytes from one node's egress NIC to another's ingress NIC.
  Concurrent flows share NICs max-min fairly (processor sharing by progressive
  filling): rates are recomputed, for the flows connected to the change, on
  every flow arrival and departure. Alone, a flow runs at min(egress, ingress).
* A sender's links (:mod:`synclab.sim.link`) start flows here
  (:meth:`Network.start_flow`) and are called back when a flow's last bit is
  through; the one-way delay is theirs to add (:meth:`Network.after`).
* With the host modelled (:mod:`synclab.sim.host`) every flow also crosses the
  host's cores, one more NIC-like resource (``Network.cpu``), and the host's
  serial work, start-ups and per-tensor work are jobs of its :class:`~synclab.sim.host.CpuServer`.
* With the host modelled, a shaped NIC also holds the emulator's shaper
  bucket (:class:`TokenBucket`): tbf passes a burst at host speed after an
  idle spell, so messages up to the bucket cost no wire time. It is what
  lowers the emulator's fitted a below its start-up (docs/explanation/fidelity.md,
  "Shaper buckets").

Loss is not modelled. Hot paths use SimPy timeouts with plain callbacks (no
process generators) and count every event they schedule (``Network.events``).
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

import simpy

from synclab.sim.host import CpuServer, HostCpu

Callback = Callable[[], None]


class SenderGroup:
    """The priority links of one sending process: one priority order (the transport's ``SchedulerGroup``)."""

    __slots__ = ("senders", "parked")

    def __init__(self):
        self.senders: list = []  # the group's links (synclab.sim.link.Link)
        self.parked: dict[int, object] = {}  # those waiting for a more urgent sibling (insertion-ordered)


class TokenBucket:
    """The emulator's tbf bucket on one shaped NIC (emulated seconds and bits; opt-in, with the host modelled).

    tbf lets a packet through at the host's (veth) speed while its bucket holds tokens, and only then at the
    rate: tokens accrue at the rate up to ``burst_bits``. After an idle spell the first ``burst_bits`` of a
    transfer therefore cost no wire time (the emulator's ring fit sees messages up to the bucket almost free:
    docs/explanation/fidelity.md "Shaper buckets", issue 14). Fluid version: tokens accrue at ``rate_bps``
    while the NIC carries no flow (a NIC that carries flows sends at its rate, which spends what accrues; a NIC
    held below its rate by another bottleneck would accrue the difference: not modelled) and a flow starting on
    the NIC takes what is there. ``burst_bits`` is :func:`synclab.transport.shaper.bucket_for` of the link as
    the launcher shapes it (:func:`synclab.netem.dilation.dilate`: rate / D, ``kernel=True``), in the NIC's units.
    """

    __slots__ = ("rate_bps", "burst_bits", "tokens", "t")

    def __init__(self, rate_bps: float, burst_bits: float):
        if rate_bps <= 0 or burst_bits < 0:
            raise ValueError(f"token bucket needs rate > 0 and burst >= 0, got {rate_bps}, {burst_bits}")
        self.rate_bps, self.burst_bits = rate_bps, burst_bits
        self.tokens, self.t = burst_bits, 0.0  # full at the start, as a fresh tbf is

    def advance(self, now: float, busy: bool) -> None:
        """Bring the tokens up to ``now``; ``busy``: the NIC carried a flow since the last call."""
        if not busy:
            self.tokens = min(self.burst_bits, self.tokens + self.rate_bps * (now - self.t))
        self.t = now


class Nic:
    """One direction of one node's network interface. Its ``group`` orders the priority links of the
    process that sends through it, unless a link is given another (a co-located shard's process).
    ``bucket``: the emulator's tbf bucket on it (:class:`TokenBucket`), or None (a real NIC)."""

    __slots__ = ("name", "rate_bps", "flows", "group", "bucket")

    def __init__(self, name: str, rate_bps: float | None, bucket: TokenBucket | None = None):
        self.name, self.rate_bps, self.bucket = name, rate_bps, bucket
        self.flows: dict[int, Flow] = {}  # insertion-ordered: deterministic recomputation
        self.group = SenderGroup()


class Flow:
    __slots__ = ("fid", "nics", "bits", "rate", "t_last", "version", "on_done")

    def __init__(self, fid: int, nics: tuple[Nic, ...], bits: float, on_done: Callback):
        self.fid, self.nics, self.bits, self.on_done = fid, nics, bits, on_done
        self.rate, self.t_last, self.version = 0.0, 0.0, 0


class Network:
    """Fluid flows over NICs with max-min fair sharing, driven by a SimPy environment; with ``host_cpu``,
    every flow also crosses the host's cores (:class:`HostCpu`)."""

    def __init__(self, env: simpy.Environment, rng: random.Random, host_cpu: HostCpu | None = None):
        self.env, self.rng = env, rng
        self.events = 0
        self._ids = itertools.count()
        self.host_cpu = host_cpu
        self.cpu = None
        self.cpu_server = None
        if host_cpu is not None:
            cap = host_cpu.capacity_bps
            self.cpu = Nic("host/cpu", None if cap == float("inf") else cap)
            self.cpu_server = CpuServer(self, host_cpu.cores)

    def received(self, nbytes: int, on_done: Callback) -> None:
        """A message's last byte is in: its receiver's serial processing on the host (if modelled), then
        ``on_done``."""
        h = self.host_cpu
        if h is None or h.serial_s_per_byte <= 0:
            on_done()
            return
        # a host CPU second is 1/D emulated seconds (the host runs D× slower than the emulated clock)
        self.cpu_server.submit(nbytes * h.serial_s_per_byte / h.dilation, on_done, weight=h.mirrored)

    def start_up(self, startup_s: float, fn: Callback) -> None:
        """A message's start-up ``a``, then ``fn``: a plain delay, or with the host modelled a job of the
        host's cores (the emulator's a is its host's per-message CPU: concurrent start-ups share the cores,
        so 8 ring ranks on 2 cores each wait 4× as long as one alone)."""
        if self.cpu_server is None or startup_s <= 0:
            self.after(startup_s, fn)
        else:
            self.cpu_server.submit(startup_s, fn, weight=self.host_cpu.mirrored)

    def tensor_job(self, fn: Callback) -> None:
        """A worker's per-tensor runtime work beside the ring (``HostCpu.tensor_s`` host seconds: the gradient's
        hand-over to the communication thread, its events, the update call and the gate), then ``fn``: a job of
        the host's cores as the start-up is (1/D of it on the emulated clock; the ring's N ranks each do it, so
        it weighs N), or ``fn`` at once when the host is not modelled."""
        h = self.host_cpu
        if h is None or h.tensor_s <= 0:
            fn()
            return
        self.cpu_server.submit(h.tensor_s / h.dilation, fn, weight=h.mirrored)

    def after(self, delay_s: float, fn: Callback) -> None:
        """Call ``fn`` ``delay_s`` seconds from now (one counted event)."""
        self.events += 1
        ev = self.env.timeout(delay_s)
        ev.callbacks.append(lambda _: fn())

    def start_flow(self, egress: Nic, ingress: Nic, nbytes: int, on_done: Callback) -> None:
        """Move ``nbytes`` from ``egress`` to ``ingress``; ``on_done`` when the last byte is through.

        Where the NICs hold tbf buckets (:class:`TokenBucket`), the bits their tokens cover pass first
        without them (across the host's cores only, when modelled), then the rest at the NICs' rates."""
        bits = nbytes * 8.0
        buckets = [n.bucket for n in (egress, ingress) if n.bucket is not None]
        if buckets and bits > 0:
            now = self.env.now
            for n in (egress, ingress):
                if n.bucket is not None:
                    n.bucket.advance(now, busy=bool(n.flows))
            free = min(bits, *(b.tokens for b in buckets))
            if free > 0:
                for b in buckets:
                    b.tokens -= free
                rest = bits - free
                then = on_done if rest <= 0 else (lambda: self._flow((egress, ingress), rest, on_done))
                self._flow((), free, then)
                return
        self._flow((egress, ingress), bits, on_done)

    def _flow(self, path: tuple[Nic, ...], bits: float, on_done: Callback) -> None:
        nics = tuple(n for n in (*path, self.cpu) if n is not None and n.rate_bps is not None)
        if bits <= 0 or not nics:
            self.after(0.0, on_done)
            return
        for n in nics:
            if n.bucket is not None:
                n.bucket.advance(self.env.now, busy=bool(n.flows))
        flow = Flow(next(self._ids), nics, bits, on_done)
        flow.t_last = self.env.now
        for n in nics:
            n.flows[flow.fid] = flow
        if all(len(n.flows) == 1 for n in nics):
            # alone on every NIC it crosses (a ring's step, one PS push): progressive filling would give it
            # the slowest NIC's rate; say so directly instead of walking the component (same rate, same event)
            flow.rate = min(float(n.rate_bps) for n in nics)
            self._schedule_finish(flow)
            return
        self._reshare(nics)

    def _finish(self, flow: Flow, version: int) -> None:
        if version != flow.version:
            return  # superseded by a later rate change
        for n in flow.nics:
            if n.bucket is not None:
                n.bucket.advance(self.env.now, busy=True)
            del n.flows[flow.fid]
        flow.bits = 0.0
        if any(n.flows for n in flow.nics):  # flows left beside it get its share
            self._reshare(flow.nics)
        flow.on_done()

    def _component(self, nics: tuple[Nic, ...]) -> tuple[list[Nic], list[Flow]]:
        """The NICs and flows connected to ``nics`` through shared flows."""
        seen_nics: dict[int, Nic] = {}
        seen_flows: dict[int, Flow] = {}
        todo = list(nics)
        while todo:
            n = todo.pop()
            if id(n) in seen_nics:
                continue
            seen_nics[id(n)] = n
            for f in n.flows.values():
                if f.fid not in seen_flows:
                    seen_flows[f.fid] = f
                    todo.extend(m for m in f.nics if id(m) not in seen_nics)
        return list(seen_nics.values()), sorted(seen_flows.values(), key=lambda f: f.fid)

    def _reshare(self, nics: tuple[Nic, ...]) -> None:
        """Recompute max-min fair rates (progressive filling) of the flows connected to ``nics``."""
        now = self.env.now
        comp_nics, flows = self._component(nics)
        if not flows:
            return
        for f in flows:  # bring every affected flow's progress up to now at its old rate
            f.bits = max(0.0, f.bits - f.rate * (now - f.t_last))
            f.t_last = now
        cap = {id(n): float(n.rate_bps) for n in comp_nics}
        left = {id(n): sum(1 for _ in n.flows) for n in comp_nics}
        unfrozen = {f.fid: f for f in flows}
        while unfrozen:
            share, bottleneck = min(((cap[id(n)] / left[id(n)], i) for i, n in enumerate(comp_nics)
                                     if left[id(n)] > 0), key=lambda x: x[0])
            for f in [f for f in comp_nics[bottleneck].flows.values() if f.fid in unfrozen]:
                f.rate = share
                del unfrozen[f.fid]
                for m in f.nics:
                    cap[id(m)] = max(0.0, cap[id(m)] - share)
                    left[id(m)] -= 1
        for f in flows:
            self._schedule_finish(f)

    def _schedule_finish(self, f: Flow) -> None:
        """(Re)schedule ``f``'s last byte at its current rate; an earlier schedule is superseded."""
        f.version += 1
        v = f.version
        self.events += 1
        ev = self.env.timeout(f.bits / f.rate if f.rate > 0 else float("inf"))
        ev.callbacks.append(lambda _, f=f, v=v: self._finish(f, v))
