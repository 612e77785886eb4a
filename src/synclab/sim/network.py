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

Loss is not modelled. Hot paths use SimPy timeouts with plain callbacks (no
process generators) and count every event they schedule (``Network.events``).
"""

from __future__ import annotations

import heapq
import itertools
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


class Nic:
    """One direction of one node's network interface. Its ``group`` orders the priority links of the
    process that sends through it, unless a link is given another (a co-located shard's process)."""

    __slots__ = ("name", "rate_bps", "flows", "group")

    def __init__(self, name: str, rate_bps: float | None):
        self.name, self.rate_bps = name, rate_bps
        self.flows: dict[int, Flow] = {}  # insertion-ordered: deterministic recomputation
        self.group = SenderGroup()


class Flow:
    __slots__ = ("fid", "nics", "bits", "rate", "t_last", "version", "on_done")

    def __init__(self, fid: int, nics: tuple[Nic, ...], bits: float, on_done: Callback):
        self.fid, self.nics, self.bits, self.on_done = fid, nics, bits, on_done
        self.rate, self.t_last, self.version = 0.0, 0.0, 0


class Network:
    """Fluid flows over NICs with max-min fair sharing, driven by a SimPy environment."""

    def __init__(self, env: simpy.Environment, rng: random.Random):
        self.env, self.rng = env, rng
        self.events = 0
        self._ids = itertools.count()

    def after(self, delay_s: float, fn: Callback) -> None:
        """Call ``fn`` ``delay_s`` seconds from now (one counted event)."""
        self.events += 1
        ev = self.env.timeout(delay_s)
        ev.callbacks.append(lambda _: fn())

    def start_flow(self, egress: Nic, ingress: Nic, nbytes: int, on_done: Callback) -> None:
        """Move ``nbytes`` from ``egress`` to ``ingress``; ``on_done`` when the last byte is through."""
        nics = tuple(n for n in (egress, ingress) if n.rate_bps is not None)
        if nbytes <= 0 or not nics:
            self.after(0.0, on_done)
            return
        flow = Flow(next(self._ids), nics, nbytes * 8.0, on_done)
        flow.t_last = self.env.now
        for n in nics:
            n.flows[flow.fid] = flow
        self._reshare(nics)

    def _finish(self, flow: Flow, version: int) -> None:
        if version != flow.version:
            return  # superseded by a later rate change
        for n in flow.nics:
            del n.flows[flow.fid]
        flow.bits = 0.0
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
            self.net.after(self.startup_s, lambda: self._chunk(msg))
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
        else:
            latency = self.delay_s
            if self.jitter_s:
                latency += self.net.rng.uniform(-self.jitter_s, self.jitter_s)
            if self.on_message is not None:
                self.on_message(msg.t0, self.net.env.now + latency, msg.nbytes)
            if latency > 0:
                self.net.after(latency, msg.on_delivered)
            else:
                msg.on_delivered()
        self._next()
        if self.group.parked:
            self._wake_parked()  # this link's head changed: a parked sibling may be the most urgent now
