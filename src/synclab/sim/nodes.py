"""Simulated nodes: the cluster's NICs and links from the link profiles, the ring all-reduce as flows,
the communication thread, and a worker's replayed compute with its per-layer gates.

A worker replays its model profile as :class:`synclab.compute.replay.ReplayEngine`
does: forward layer by layer (each layer first waits on its gate, i.e. until all
its tensors hold the previous iteration's update — DESIGN "Data flow" 1), then
backward tensor by tensor in backward order, each gradient handed to the
strategy when its t_b has passed (MG-WFBP eq. 6). Records follow
``synclab.roles.worker``: an iteration spans from its start to the next one's,
``compute_s`` excludes gate waits, ``comm_wait_s`` is the rest, ``comm_span_s``
runs from the first gradient to all parameters fresh.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import simpy

from synclab.collective.schedules import segment_bounds
from synclab.linkprofile import LinkProfile, resolve_for_role
from synclab.netem.dilation import dilate
from synclab.sim.link import Link
from synclab.sim.network import Network, Nic, SenderGroup, TokenBucket
from synclab.transport.shaper import bucket_for, profile_bucket

Callback = Callable[[], None]


class Cluster:
    """Nodes (``worker0``…, ``ps0``…) with an egress and an ingress NIC each, and links made on first use.

    ``machine_of(node)`` names the node whose machine (NICs) a node uses (``Spec.machine_of``: with
    ``cluster.colocate_ps`` shard i shares worker i's): co-located nodes share both NICs, each keeps
    its own priority order (its own process's send scheduler), and what they send each other goes
    over the loopback (the per-message start-up cost, no NIC, no delay).

    ``payload_share``: the share of a link's rate that carries message bytes (the rest is TCP/IP and
    Ethernet headers; a profile's rate is the wire rate, :data:`synclab.sim.run.PAYLOAD_SHARE`).
    """

    def __init__(self, net: Network, profile: LinkProfile | None, *, startup_s: float, chunk_bytes: int,
                 policies: dict[str, str], record_spans: bool, machine_of: Callable[[str], str] = str,
                 payload_share: float = 1.0, queue_bytes: int | None = None, tbf_buckets: bool = True,
                 app_shaper: bool = False):
        if not 0 < payload_share <= 1:
            raise ValueError(f"payload_share must be in (0, 1], got {payload_share}")
        self.net, self.profile, self.startup_s, self.chunk_bytes = net, profile, startup_s, chunk_bytes
        self.payload_share = payload_share
        # with the emulator's host modelled: its shapers' buckets (tbf/htb, or the transport's ``app`` one)
        self.tbf_buckets, self.app_shaper = tbf_buckets, app_shaper
        self.machine_of = machine_of
        self.queue_bytes = queue_bytes  # each link's send-queue capacity (transport.queue_bytes)
        self.groups: dict[str, SenderGroup] = {}  # node -> the priority order of its process
        self.policies = policies  # role -> send policy of its links
        self.record_spans = record_spans
        self.nics: dict[str, tuple[Nic, Nic, LinkProfile | None]] = {}
        self.links: dict[tuple[str, str], Link] = {}
        self.spans: list[tuple[str, str, float, float, int]] = []  # (src, dst, start_s, end_s, bytes)
        self.bytes_sent: dict[str, int] = {}
        self.bytes_received: dict[str, int] = {}

    @staticmethod
    def role(node: str) -> str:
        return node.rstrip("0123456789")

    def _node(self, node: str) -> tuple[Nic, Nic, LinkProfile | None]:
        machine = self.machine_of(node)
        if machine not in self.nics:
            p = None if self.profile is None else resolve_for_role(self.profile, self.role(machine))
            rate = None if p is None or p.rate_bps is None else p.rate_bps * self.payload_share
            egress = rate if p is not None and p.shapes_egress else None
            ingress = rate if p is not None and p.shapes_ingress else None
            self.nics[machine] = (Nic(f"{machine}/tx", egress, self._bucket(p, egress)),
                                  Nic(f"{machine}/rx", ingress, self._bucket(p, ingress)), p)
        return self.nics[machine]

    def _bucket(self, p: LinkProfile | None, rate: float | None) -> TokenBucket | None:
        """The emulator's tbf bucket of a NIC shaped at ``rate`` (payload bit/s), when the emulator's host is
        modelled (``net.host_cpu``; a real NIC has none): the burst the launcher gives tbf for the link at
        rate / D (:func:`~synclab.netem.dilation.dilate`, ``profile_bucket(kernel=True)``), in bytes of the wire (the
        same bytes on the emulated clock), carrying payload at ``payload_share``; ``app_shaper``: the
        transport's own bucket (``network.backend: app``: no 8 ms floor, room for one chunk)."""
        h = self.net.host_cpu
        if h is None or not self.tbf_buckets or p is None or rate is None:
            return None
        d = dilate(p, h.dilation)
        burst = (bucket_for(d.rate_bps, burst_bytes=d.burst_bytes, chunk_bytes=self.chunk_bytes) if self.app_shaper
                 else profile_bucket(d, kernel=True)).burst_bytes
        return TokenBucket(rate, burst * 8.0 * self.payload_share)

    def link(self, src: str, dst: str) -> Link:
        link = self.links.get((src, dst))
        if link is None:
            s_tx, _, sp = self._node(src)
            _, d_rx, dp = self._node(dst)
            delay = jitter = 0.0
            if self.machine_of(src) == self.machine_of(dst):  # co-located: the loopback
                s_tx, d_rx = Nic(f"{src}/lo", None), Nic(f"{dst}/lo", None)
            else:
                for p, shapes in ((sp, sp is not None and sp.shapes_egress),
                                  (dp, dp is not None and dp.shapes_ingress)):
                    if shapes:
                        delay, jitter = delay + p.delay_s, jitter + p.jitter_s
            record = None
            if self.record_spans:
                def record(t0, t1, nbytes, src=src, dst=dst):
                    self.spans.append((src, dst, t0, t1, nbytes))
            link = Link(self.net, s_tx, d_rx, policy=self.policies.get(self.role(src), "fifo"),
                        chunk_bytes=self.chunk_bytes, startup_s=self.startup_s, delay_s=delay, jitter_s=jitter,
                        on_message=record, group=self.groups.setdefault(src, SenderGroup()),
                        capacity_bytes=self.queue_bytes)
            self.links[(src, dst)] = link
        return link

    def send_blocking(self, src: str, dst: str, nbytes: int, on_delivered: Callback, priority: int,
                      then: Callback) -> None:
        """:meth:`send` as a blocking ``Link.send`` of the transport: ``then`` once the message is queued,
        which waits while the link's queue is full (``transport.queue_bytes``)."""
        self.link(src, dst).admit(nbytes, lambda: (self.send(src, dst, nbytes, on_delivered, priority), then()))

    def send(self, src: str, dst: str, nbytes: int, on_delivered: Callback, priority: int = 0) -> None:
        self.bytes_sent[src] = self.bytes_sent.get(src, 0) + nbytes
        self.bytes_received[dst] = self.bytes_received.get(dst, 0) + nbytes
        self.link(src, dst).send(nbytes, on_delivered, priority)


def ring_allreduce(cluster: Cluster, world: int, numel: int, elem_bytes: int, on_done: Callback,
                   mirror: Callable[[int], None] | None = None,
                   goodput: float | Callable[[int], float] = 1.0, priority: int = 0) -> None:
    """Ring all-reduce of ``numel`` elements: 2(N-1) steps, each one segment (of M/N) per rank to its
    successor (as :func:`synclab.collective.ring.ring_allreduce_`; Table 2 "Ring" of MG-WFBP).

    All ranks of an all-reduce strategy are identical (same profile, same worker link profile),
    so a step is N equal flows on N distinct NIC pairs that never contend with each other:
    the flow worker0 -> worker1 goes through the NIC model and the other N-1 mirror it
    (``mirror(bytes)`` counts their bytes). Each step carries the largest segment
    (ceil(M/N)): the ring advances at the pace of its slowest rank. A step starts when
    the previous one was delivered (rank r sends step s+1 once it received step s). ``goodput`` < 1 (the
    emulator host's measured ring goodput, :meth:`~synclab.sim.host.HostCpu.ring_share`; a share, or a
    function of the segment's bytes): a segment occupies its link as long as ``seg / goodput`` bytes would; the
    bytes counted stay ``seg``. Every segment carries ``priority`` (:meth:`Cluster.send`).
    """
    if world <= 1 or numel <= 0:
        cluster.net.after(0.0, on_done)
        return
    seg = max(hi - lo for lo, hi in segment_bounds(numel, world)) * elem_bytes
    share = goodput(seg) if callable(goodput) else goodput
    wire = seg if share >= 1 else math.ceil(seg / share)
    steps = 2 * (world - 1)
    state = [0]

    def step() -> None:
        if state[0] == steps:
            on_done()
            return
        state[0] += 1
        if mirror is not None:
            mirror(seg)
        cluster.send("worker0", "worker1", wire, step, priority)

    step()


class CommThread:
    """The worker's communication thread: strategy callbacks run one at a time, in submission order.

    A job is ``fn(done)``; it may start simulated work and calls ``done()`` when the real
    strategy's call would return (e.g. ``wfbp`` blocks on its all-reduce).
    """

    def __init__(self):
        self._q: deque[Callable[[Callback], None]] = deque()
        self._busy = False

    def submit(self, fn: Callable[[Callback], None]) -> None:
        self._q.append(fn)
        if not self._busy:
            self._run()

    def _run(self) -> None:
        if not self._q:
            self._busy = False
            return
        self._busy = True
        self._q.popleft()(self._run)


class SimWorker:
    """One worker's replayed compute and gates; the strategy model (``self.strategy``) does the rest."""

    def __init__(self, sim, rank: int):
        self.sim, self.rank, self.node = sim, rank, f"worker{rank}"
        self.env: simpy.Environment = sim.env
        n = len(sim.numels)
        self.fresh = [0] * n          # the last iteration whose update tensor i holds
        self.layer_waiter: dict[int, simpy.Event] = {}
        self.comm = CommThread()
        self.strategy = None
        self.rows: list[dict] = []
        self.synced_at: dict[int, float] = {}
        self._stale_count: dict[int, int] = {}
        self.ready: list[float] = [0.0] * n
        self.forward_s = 0.0
        self._bytes0 = (0, 0)
        self.backward_start = 0.0

    # -- gates --------------------------------------------------------------------------------------

    def _layer_open(self, layer: int, iteration: int) -> bool:
        return all(self.fresh[i] >= iteration - 1 for i in self.sim.layer_tensors[layer])

    def mark_fresh(self, index: int, iteration: int) -> None:
        self.fresh[index] = iteration
        self.sim.event(iteration, self.rank, index, "params_fresh")
        left = self._stale_count[iteration] = self._stale_count[iteration] - 1
        if left == 0:
            self.synced_at[iteration] = self.env.now
            del self._stale_count[iteration]
            self.check_drained()
        layer = self.sim.layer_of[index]
        ev = self.layer_waiter.get(layer)
        if ev is not None and self._layer_open(layer, iteration + 1):
            del self.layer_waiter[layer]
            ev.succeed()

    # -- the training loop ----------------------------------------------------------------------------

    def _forward(self, it: int, layers, factor: float = 1.0):
        """Forward of ``layers``, each behind its gate (its tensors' updates of the previous iteration), each
        taking its profile time × ``factor``; returns the time spent at the gates (``yield from`` it)."""
        sim, env = self.sim, self.env
        waited = 0.0
        for layer in layers:
            if not self._layer_open(layer, it):
                t0 = env.now
                ev = self.layer_waiter[layer] = env.event()
                sim.net.events += 1
                yield ev
                waited += env.now - t0
                sim.span(self.rank, "gate_wait", it, t0, env.now)
            if sim.layer_fwd[layer] > 0:
                sim.net.events += 1
                yield env.timeout(sim.layer_fwd[layer] * factor)
        return waited

    def run(self):
        sim, env = self.sim, self.env
        prev = None
        for it in range(1, sim.iterations + 1):
            start = env.now
            slow = sim.compute_factor(self.rank, it)  # cluster.slowdown / cluster.straggler
            gate_wait = yield from self._forward(it, range(len(sim.layer_fwd)), slow)
            self.forward_s = env.now - start - gate_wait
            self.backward_start = env.now
            self._stale_count[it] = len(sim.numels)
            first_grad = None
            for i in range(len(sim.numels) - 1, -1, -1):
                if sim.bwd[i] > 0:
                    sim.net.events += 1
                    yield env.timeout(sim.bwd[i] * slow)
                self.ready[i] = env.now
                first_grad = env.now if first_grad is None else first_grad
                sim.event(it, self.rank, i, "grad_ready")
                self.strategy.on_gradient(it, i)
            self.strategy.on_backward_end(it)
            sim.span(self.rank, "compute", it, start, env.now)
            if prev is not None:  # every gate of this forward opened: the previous iteration's sync is complete
                self._report(prev, start)
            prev = {"iteration": it, "start": start, "compute": env.now - start - gate_wait, "first_grad": first_grad}
        computed = env.now
        while self._stale_count:  # the job's drain: every update of the last iteration lands
            ev = self.layer_waiter[-1] = env.event()
            yield ev
        self._report(prev, computed)

    def check_drained(self) -> None:
        ev = self.layer_waiter.get(-1)
        if ev is not None and not self._stale_count:
            del self.layer_waiter[-1]
            ev.succeed()

    def _report(self, prev: dict, end: float) -> None:
        it = prev["iteration"]
        iteration_s = end - prev["start"]
        synced = self.synced_at.pop(it, prev["first_grad"])
        sent, received = self.sim.node_bytes(self.node)
        sent0, received0 = self._bytes0
        self._bytes0 = (sent, received)
        self.rows.append({"iteration": it, "rank": self.rank, "start_s": prev["start"] - self.sim.t_job,
                          "iteration_s": iteration_s, "compute_s": prev["compute"],
                          "comm_wait_s": max(0.0, iteration_s - prev["compute"]), "loss": float("nan"),
                          "samples": self.sim.samples,
                          "bytes_sent": sent - sent0, "bytes_received": received - received0, "comm_span_s": max(0.0, synced - prev["first_grad"])})
