"""Send queues of the simulated network: one sender's queue towards one destination, over the fabric.

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
  whose gates wait on such messages can get faster (issue 14, docs/explanation/fidelity.md
  "The simulator's host model"; ``tests/unit/sim/test_network.py``).
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable

from synclab.sim.network import Callback, Network, Nic, SenderGroup


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
