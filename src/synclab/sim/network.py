"""The simulated network: NICs as shared resources, fluid flows, per-destination send queues.

Model (the same picture as the emulator's transport over tc-shaped links):

* Every node has an egress NIC and an ingress NIC, each with the rate its link
  profile gives that direction (``None``: not shaped, unlimited).
* A *flow* moves bytes from one node's egress NIC to another's ingress NIC.
  Concurrent flows share NICs max-min fairly (processor sharing by progressive
  filling): rates are recomputed, for the flows connected to the change, on
  every flow arrival and departure. Alone, a flow runs at min(egress, ingress).
* A :class:`Link` is one sender's queue towards one destination, as
  :class:`synclab.transport.scheduler.SendScheduler` is: FIFO or priority
  (smaller number first), one message at a time, cut into ``chunk_bytes``
  chunks, so a higher-priority message overtakes at the next chunk boundary
  (P3 §4.2). The priority queues of one sender form one order, as the
  transport's :class:`~synclab.transport.scheduler.SchedulerGroup` does: a link
  starts its next chunk only when no other link of the sender has a more urgent
  message at its head (P3 §4.2's single consumer). Equal priorities, and FIFO
  links, share the NIC fairly, as TCP streams share it.
* A link's queue holds at most ``capacity_bytes`` not yet on the wire, as the transport's
  ``SendScheduler.put`` does (``transport.queue_bytes``): a sender that asks to be told
  (:meth:`Link.admit`) waits while the queued bytes and its message would exceed it (one message
  is always admitted). This is the back-pressure that holds a worker's communication thread
  when it pushes faster than its link drains (SSD-SGD's local iterations).
* Every message pays a start-up cost ``a`` (``startup_s``) on its link before
  its first byte — the per-message constant of T = a + b·M (MG-WFBP eq. 1) —
  then its bytes at the shared rate (b = 8/rate per byte), then the one-way
  delay of the profiles (sender's egress delay + receiver's ingress delay, with
  jitter drawn uniformly in ±jitter from the simulation's seeded RNG).
  During a start-up the link has no flow, so the NICs it crosses go to the flows
  beside it (work-conserving, as an idle TCP connection leaves its share to the
  others): a larger ``a`` can deliver *another* link's message earlier, and a job
  whose gates wait on such messages can get faster (issue 14, README
  "## Simulation"; ``tests/unit/sim/test_network.py``).

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
  start-ups share the cores. Measured per dilation (session 12,
  ``synclab calibrate startup``): the ring's per-message start-up is
  the same host time at D = 1 to 8, i.e. 1/D of it on the emulated clock.
* With the host modelled, a shaped NIC also holds the emulator's shaper
  bucket (:class:`TokenBucket`): tbf passes a burst at host speed after an
  idle spell, so messages up to the bucket cost no wire time. It is what
  lowers the emulator's fitted a below its start-up (README "## Simulation").
* With the host modelled, the all-reduce strategies' per-tensor runtime work beside the ring (hand-over to
  the communication thread, events, the replayed update's call, the gate: ``HostCpu.tensor_s``, measured by
  ``synclab calibrate tensor-cost``) is a job of the same cores after each tensor's all-reduce
  (:meth:`Network.tensor_job`; session 13).

Loss is not modelled. Hot paths use SimPy timeouts with plain callbacks (no
process generators) and count every event they schedule (``Network.events``).
"""

from __future__ import annotations

import heapq
import itertools
import math
import random
from collections.abc import Callable

import simpy

Callback = Callable[[], None]


class SenderGroup:
    """The priority links of one sending process: one priority order (the transport's ``SchedulerGroup``)."""

    __slots__ = ("senders", "parked")

    def __init__(self):
        self.senders: list[Link] = []
        self.parked: dict[int, Link] = {}  # those waiting for a more urgent sibling (insertion-ordered)


class TokenBucket:
    """The emulator's tbf bucket on one shaped NIC (emulated seconds and bits; opt-in, with the host modelled).

    tbf lets a packet through at the host's (veth) speed while its bucket holds tokens, and only then at the
    rate: tokens accrue at the rate up to ``burst_bits``. After an idle spell the first ``burst_bits`` of a
    transfer therefore cost no wire time (the emulator's ring fit sees messages up to the bucket almost free:
    README "## Simulation", issue 14). Fluid version: tokens accrue at ``rate_bps`` while the NIC carries no
    flow (a NIC that carries flows sends at its rate, which spends what accrues; a NIC held below its rate
    by another bottleneck would accrue the difference: not modelled) and a flow starting on the NIC takes
    what is there. ``burst_bits`` is :func:`synclab.transport.shaper.bucket_for` of the link as the launcher
    shapes it (:func:`synclab.netem.dilation.dilate`: rate / D, ``kernel=True``), in the NIC's units.
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

    def __init__(self, net: "Network", cores: float):
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


class Message:
    __slots__ = ("nbytes", "left", "priority", "seq", "on_delivered", "t0")

    def __init__(self, nbytes: int, priority: int, seq: int, on_delivered: Callback):
        self.nbytes, self.left, self.priority, self.seq = nbytes, nbytes, priority, seq
        self.on_delivered, self.t0 = on_delivered, -1.0  # t0: when its start-up began (-1: not yet)


class Link:
    """One sender's queue towards one destination (FIFO or priority, chunked), over the shared NICs."""

    def __init__(self, net: Network, egress: Nic, ingress: Nic, *, policy: str, chunk_bytes: int,
                 startup_s: float, delay_s: float, jitter_s: float = 0.0, on_message: Callable | None = None,
                 group: SenderGroup | None = None, capacity_bytes: int | None = None):
        if policy not in ("fifo", "priority"):
            raise ValueError(f"unknown send policy {policy!r}")
        self.net, self.egress, self.ingress = net, egress, ingress
        self.group = egress.group if group is None else group
        self.policy, self.chunk_bytes, self.startup_s = policy, chunk_bytes, startup_s
        self.delay_s, self.jitter_s = delay_s, jitter_s
        self.on_message = on_message  # (start_s, end_s, nbytes) of each delivered message, for spans
        self._heap: list[tuple[int, int, Message]] = []
        self._seq = itertools.count()
        self._busy = False
        self._current: Message | None = None  # the message whose chunk is on the wire
        self.bytes_sent = 0
        self.capacity_bytes = capacity_bytes
        self.queued_bytes = 0  # enqueued, not yet handed to the wire as chunks
        self._admitting: list[tuple[int, Callback]] = []  # senders waiting for room, in order
        if policy == "priority":
            self.group.senders.append(self)

    def head_priority(self) -> int | None:
        """The most urgent priority this link holds: its message on the wire or the head of its queue."""
        heads = [m.priority for m in (self._current, self._heap[0][2] if self._heap else None) if m is not None]
        return min(heads) if heads else None

    def _held_back(self) -> bool:
        """Another link of this sender has a more urgent message (priority links only)."""
        if self.policy != "priority" or len(self.group.senders) < 2:
            return False
        mine = self._heap[0][0]
        return any(o is not self and (h := o.head_priority()) is not None and h < mine for o in self.group.senders)

    def _wake_parked(self) -> None:
        parked, self.group.parked = self.group.parked, {}
        for o in parked.values():
            if not o._busy:
                o._next()

    def admit(self, nbytes: int, then: Callback) -> None:
        """Call ``then`` once a message of ``nbytes`` fits the queue (``SendScheduler.put``'s wait)."""
        if not self._admitting and self._fits(nbytes):
            then()
        else:
            self._admitting.append((nbytes, then))

    def _fits(self, nbytes: int) -> bool:
        return self.capacity_bytes is None or not self.queued_bytes or \
            self.queued_bytes + nbytes <= self.capacity_bytes

    def _room(self) -> None:
        while self._admitting and self._fits(self._admitting[0][0]):
            _, then = self._admitting.pop(0)
            then()

    def send(self, nbytes: int, on_delivered: Callback, priority: int = 0) -> None:
        self.queued_bytes += nbytes
        msg = Message(nbytes, priority if self.policy == "priority" else 0, next(self._seq), on_delivered)
        heapq.heappush(self._heap, (msg.priority, msg.seq, msg))
        if not self._busy:
            self._next()

    def _next(self) -> None:
        if not self._heap:
            self._busy = False
            return
        if self._held_back():  # parked until a more urgent sibling's head is gone
            self._busy = False
            self.group.parked[id(self)] = self
            return
        self._busy = True
        _, _, msg = heapq.heappop(self._heap)
        self._current = msg
        if msg.t0 < 0:
            msg.t0 = self.net.env.now
            self.net.start_up(self.startup_s, lambda: self._chunk(msg))
        else:
            self._chunk(msg)

    def _chunk(self, msg: Message) -> None:
        n = min(msg.left, self.chunk_bytes)
        self.queued_bytes -= n
        if self._admitting:
            self._room()
        self.net.start_flow(self.egress, self.ingress, n, lambda: self._chunk_done(msg, n))

    def _chunk_done(self, msg: Message, n: int) -> None:
        msg.left -= n
        self.bytes_sent += n
        self._current = None
        if msg.left > 0:  # back in the queue at its own place: a higher priority overtakes here
            heapq.heappush(self._heap, (msg.priority, -1, msg))
        elif self.net.cpu_server is not None and self.net.host_cpu.serial_s_per_byte > 0:
            self.net.received(msg.nbytes, lambda: self._deliver(msg))
        else:
            self._deliver(msg)
        self._next()
        if self.group.parked:
            self._wake_parked()  # this link's head changed: a parked sibling may be the most urgent now

    def _deliver(self, msg: Message) -> None:
        latency = self.delay_s
        if self.jitter_s:
            latency += self.net.rng.uniform(-self.jitter_s, self.jitter_s)
        if self.on_message is not None:
            self.on_message(msg.t0, self.net.env.now + latency, msg.nbytes)
        if latency > 0:
            self.net.after(latency, msg.on_delivered)
        else:
            msg.on_delivered()
