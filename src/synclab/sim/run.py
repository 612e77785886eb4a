"""One simulated job: a spec in, run records out (:func:`simulate`).

The spec is the one ``synclab run`` takes (:func:`synclab.config.load_spec`); the model
profile is the one replay would use (``compute.profile``, else
:func:`synclab.compute.profile.find_default_profile`, through
:func:`synclab.config.resolve.resolve_compute`), times × ``compute.scale``; the links
are ``network.profile`` / ``network.rate``+``delay`` with per-role overrides
(:func:`synclab.linkprofile.resolve_for_role`); the plans come from the strategies'
own ``make_plan`` and planning functions, the model from the strategy's own declaration
(``Strategy.sim_model``, :mod:`synclab.strategies.simmodel`, implemented in :mod:`synclab.sim.strategies`).
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass, field
from typing import Any

import simpy

from synclab.config import Spec, SpecError, parse_spec
from synclab.sim.goodput import PAYLOAD_SHARE, GoodputTable, parse_ring_goodput, ring_goodput_for  # noqa: F401 (re-exported)
from synclab.sim.host import HostCpu, goodput_at  # noqa: F401 (re-exported)
from synclab.sim.network import Network
from synclab.sim.nodes import Cluster, SimWorker, ring_allreduce
from synclab.sim.strategies import SimShard, fit_ring_cost, model_for
from synclab.strategies.simmodel import ParameterServer, RingAllReduce, SimModel, SplitRoles

# The per-message start-up cost a (seconds). Source: the MG-WFBP fit of `synclab run` with strategy
# mgwfbp (plans/mgwfbp.py fit_cost_model, recorded in plan.json) on this 2-core VM, re-measured
# 2026-11-25/26 (batch 23:57-00:07 UTC) after the frame codec
# (run dir runs/sim-vs-emu-s10/mgwfbp-1gbit-2w-resnet50/emu): 2 workers
# in network namespaces, network.rate=1gbit (tbf), resnet50 replay x0.01, 5 rounds x 6 sizes:
# a = 1.945 ms for a 2-worker ring all-reduce (R² = 0.998), which is 2(N-1) = 2 messages:
# a = 0.972 ms per message (the smallest sizes agree: median 1.86 ms for 7132 B = 2 x 0.93 ms).
# The host was shared (load average 4.9 at the start of that batch). The 2026-11-24 fit gave 0.861 ms.
DEFAULT_STARTUP_S = 0.000972
# The emulator's data plane costs this many host CPU seconds per byte moved (all processes, sender and
# receiver together). Source: CHANGELOG.md "The data plane beside gloo", `benchmarks/allreduce_vs_gloo.py`
# on this 2-core VM, 2026-11-24: SyncLab's ring all-reduce of ResNet-50's 102 MB over 1 Gbit/s tbf,
# "CPU s/GB" 2.09 at 2 ranks and 2.09 at 4 ranks (all ranks' user+system over 2(N-1)·M·4 bytes sent).
# Used only with ``host_cores`` (HostCpu, the emulator's host as a shared resource; off by default).
DEFAULT_CPU_S_PER_BYTE = 2.09e-9
# Of that, the share not overlapped with the wire (reassembly and the ring's add once a segment is in,
# before the next step leaves: store and forward). Source: the same table, 1 Gbit/s, 2 ranks, where the
# two ranks' work runs on two cores without contention: SyncLab 0.881 s against the ring bound 0.818 s
# at the wire rate, 0.818 / PAYLOAD_SHARE = 0.855 s at the payload rate; 2 steps of 51.1 MB, each with
# one start-up (0.861 ms): (0.881 - 0.855 - 2 x 0.000861) / (2 x 51.1e6 B) = 0.23 ns/B. Cross-check on the
# 4-rank row (not used to set it): 6 steps of 25.5 MB, 4 ranks' jobs on 2 cores at half speed each,
# 1.283 s + 6 x 0.861 ms + 6 x 25.5e6 x 0.23e-9 x 2 = 1.359 s against 1.364 s measured.
DEFAULT_SERIAL_S_PER_BYTE = 0.23e-9
# The worker runtime's own host time per tensor beside the ring, for the all-reduce strategies (2026-11-26,
# issue 14): handing the gradient to the communication thread, flattening or copying it, the send_start /
# send_end events, the update call (replay: a time.sleep of the tensor's update share, which Linux ends late),
# the gate (mark_fresh and its event). Two paths (``SimModel.host_path``): "per-tensor" (WFBP) does all of it
# per tensor around one all-reduce per tensor; "grouped" (SyncEASGD, and MG-WFBP's merged groups and the local
# reference, whose per-tensor work after a group's all-reduce is the same sgd_ + mark_fresh loop) copies each
# gradient into the group's buffer and updates tensor by tensor after the group's ring. Source: `synclab calibrate tensor-cost` (the real
# Wfbp / SyncEasgd and ReplayEngine in one process, world = 1 so the ring returns at once; ResNet-50 replay
# x0.01, 161 tensors; the host seconds beyond the replayed update share, per tensor, mean of D = 1, 2, 4, 8)
# on this 2-core VM, 2026-11-26 09:22 UTC, 30 iterations, under the host's emulation lock (no emulation beside
# it; load average 7.4 -> 6.6, lagging the emulation before): wfbp 137.7, 145.4, 134.0, 141.8 us at D = 1, 2,
# 4, 8 (mean 140; CPU 79-91 us of it); synceasgd 125.4, 121.8, 114.3, 119.1 us (mean 120). Unlocked at 09:14
# (an emulation beside it, load 4.4): wfbp 142-179, synceasgd 117-130 us.
# The emulated runs agree in size: `wfbp` spent 0.10, 0.09, 0.06 ms of the emulated clock per tensor between
# its all-reduces at 2, 4, 8 workers (D = 2, 4, 8; runs/sim-vs-emu-s11), the simulator 0.003 ms.
# Used only with ``host_cores`` (HostCpu.tensor_s: a job of the host's cores after each tensor's update).
DEFAULT_TENSOR_S = {"per-tensor": 140e-6, "grouped": 120e-6}

EVENT_CAP = 2_000_000  # per-tensor events and spans beyond this many rows are not recorded


def tensor_s_for(model: SimModel) -> float:
    """The measured per-tensor host seconds of the model's path (:data:`DEFAULT_TENSOR_S`, by
    ``model.host_path``); 0 for models whose per-tensor work is not modelled (PS, split roles)."""
    path = model.host_path
    return 0.0 if path is None else DEFAULT_TENSOR_S[path]


class UnsupportedStrategy(SpecError):
    """The strategy declares no simulator model."""


HOW_TO_ADD_A_MODEL = (
    "set `sim_model` on the strategy class: a stock model with its parameters from synclab.strategies.simmodel "
    "(RingAllReduce, ParameterServer, SplitRoles) or OwnModel(factory), whose factory gets a "
    "synclab.sim.api.ModelApi (docs/how-to/add-a-strategy.md)")


def model_of(name: str) -> SimModel:
    """The simulator model strategy ``name`` declares; :class:`UnsupportedStrategy` (saying how to add one)
    when it declares none."""
    from synclab.strategies import registry

    model = registry.get(name).sim_model
    if model is None:
        modelled = [n for n in registry.names() if registry.get(n).sim_model is not None]
        raise UnsupportedStrategy(f"strategy.name: {name!r} has no simulator model, so `synclab simulate` cannot "
                                  f"run it (`synclab run` can). To add one, {HOW_TO_ADD_A_MODEL}. Modelled: "
                                  f"{', '.join(modelled)}")
    if not isinstance(model, SimModel):
        raise UnsupportedStrategy(f"strategy.name: {name!r} declares sim_model = {model!r}, not a "
                                  f"synclab.strategies.simmodel.SimModel; {HOW_TO_ADD_A_MODEL}")
    return model


@dataclass
class SimResult:
    spec: Spec
    rows: list[dict]
    events: list[tuple]
    spans: list[tuple]
    bytes_sent: dict[str, int]
    bytes_received: dict[str, int]
    sim_events: int
    wall_s: float
    sim_s: float
    notes: list[str] = field(default_factory=list)
    plan: dict[str, Any] | None = None
    profile_meta: dict[str, Any] = field(default_factory=dict)
    startup_s: float = DEFAULT_STARTUP_S
    world: int = 1
    host_cpu: dict | None = None


def prepare(spec: Spec) -> tuple[Spec, list[str]]:
    """The spec with its replay profile inline (a ``real`` spec is simulated from the same profile)."""
    from synclab.config.resolve import resolve_compute

    model_of(spec.strategy.name)
    notes = []
    if spec.compute.mode != "replay":
        data = spec.to_dict()
        data["compute"].update(mode="replay", scale=1.0, profile=None)
        spec = parse_spec(data)
        notes.append("compute.mode real: simulated from the model's checked-in profile")
    spec, more = resolve_compute(spec)
    return spec, notes + more


def simulate_ring(world: int, numel: int, link, *, host_cores: float = 2.0, goodput: float | list = 1.0,
                  startup_s: float = DEFAULT_STARTUP_S, elem_bytes: int = 4) -> float:
    """Seconds of one ring all-reduce of ``numel`` elements among ``world`` ranks behind ``link`` (a
    :class:`~synclab.netem.profiles.LinkProfile`) on the emulator's host modelled (``host_cores``, D = 1), timed
    as ``benchmarks/allreduce_vs_gloo.py`` times SyncLab's: after an untimed warm-up all-reduce and a one-element
    barrier all-reduce. ``goodput``: the ring's share (or (segment, share) points) to simulate it with."""
    from synclab.wire.chunks import auto_chunk_bytes

    env = simpy.Environment()
    host = HostCpu(host_cores, DEFAULT_CPU_S_PER_BYTE, serial_s_per_byte=DEFAULT_SERIAL_S_PER_BYTE,
                   mirrored=world, ring_goodput=goodput)
    net = Network(env, random.Random(0), host)
    cluster = Cluster(net, link, startup_s=startup_s, chunk_bytes=auto_chunk_bytes(link.rate_bps),
                      policies={"worker": "fifo"}, record_spans=False, payload_share=PAYLOAD_SHARE)
    marks: list[float] = []

    def then(*sizes: int) -> None:
        marks.append(env.now)
        if sizes:
            ring_allreduce(cluster, world, sizes[0], elem_bytes, lambda: then(*sizes[1:]), goodput=host.ring_share)

    then(numel, 1, numel)
    env.run()
    return marks[-1] - marks[-2]


def calibrate_ring_goodput(world: int, numel: int, link, measured_s: float, *, host_cores: float = 2.0,
                           tolerance: float = 0.005, rounds: int = 12) -> tuple[float, float, float]:
    """The share of the link the emulator's ring must be given for :func:`simulate_ring` to take the
    ``measured_s`` it took alone (the measurement itself; the start-up and the host's CPU per byte are already
    modelled, so the share is what the model lacks): share ← share · simulated / measured until within
    ``tolerance``, at most 1 (a ring the model already makes slower than measured keeps 1). Returns (share,
    the simulated seconds without any share, the simulated seconds at that share)."""
    base = simulate_ring(world, numel, link, host_cores=host_cores)
    share, sim = 1.0, base
    for _ in range(rounds):
        if abs(sim / measured_s - 1) <= tolerance or (share == 1.0 and sim >= measured_s):
            break
        share = min(1.0, share * sim / measured_s)
        sim = simulate_ring(world, numel, link, host_cores=host_cores, goodput=share)
    return share, base, sim


class Simulation:
    """The shared state the node and strategy models read (see :mod:`synclab.sim.nodes`)."""

    def __init__(self, spec: Spec, *, startup_s: float = DEFAULT_STARTUP_S, workers: int | None = None,
                 record_events: bool | None = None, host_cores: float | None = None,
                 cpu_s_per_byte: float = DEFAULT_CPU_S_PER_BYTE,
                 serial_s_per_byte: float = DEFAULT_SERIAL_S_PER_BYTE, shard_cpu=None, tbf_bucket: bool = True,
                 tensor_s: float | None = None, ring_goodput: GoodputTable | None = None):
        import torch

        from synclab.core import param_layout
        from synclab.models import build_model
        from synclab.strategies import registry

        self.spec = spec
        self.shard_cpu = shard_cpu  # synclab.sim.strategies.ShardCpu or None
        s = spec
        self.name = s.strategy.name
        cls = registry.get(self.name)
        self.model = model = model_of(self.name)
        self.options = s.strategy.options
        self.world = 1 if cls.single_process else (workers or s.cluster.workers)
        self.iterations = s.run.iterations
        self.env = simpy.Environment()
        self.rng = random.Random(s.run.seed)
        # all ranks of a ring strategy are identical: rank 0 simulated, the others mirror it
        self.mirror = model.mirrors_ranks
        host_cpu = None
        if host_cores is not None:  # the emulator's one host: every node's data plane on `host_cores` cores
            host_cpu = HostCpu(host_cores, cpu_s_per_byte, serial_s_per_byte=serial_s_per_byte,
                               dilation=s.run.dilation,
                               tensor_s=tensor_s_for(model) if tensor_s is None else tensor_s,
                               mirrored=self.world if self.mirror and self.world > 1 else 1,
                               ring_goodput=ring_goodput_for(ring_goodput, self.world))
        self.net = Network(self.env, self.rng, host_cpu)
        if host_cpu is not None:  # the measured start-up is the emulator host's time: 1/D of it emulated
            startup_s = startup_s / host_cpu.dilation
        profile = s.compute.model_profile()
        self.profile = profile
        with torch.device("meta"):
            meta = build_model(s.model.name, **s.model.options)
        infos, _, layers = param_layout(meta)
        self.infos = infos
        self.numels = [i.numel for i in infos]
        self.index_of = {i.name: i.index for i in infos}
        self.layer_of = [i.layer for i in infos]
        self.layer_tensors: list[list[int]] = [[] for _ in layers]
        for i in infos:
            self.layer_tensors[i.layer].append(i.index)
        batch_factor = s.cluster.workers if cls.single_process else 1
        f = s.compute.scale * batch_factor
        self.layer_fwd = [0.0] * len(layers)
        for info, t in zip(infos, profile.tensors):
            self.layer_fwd[info.layer] += t.forward_seconds * f
        self.bwd = [t.backward_seconds * f for t in profile.tensors]
        shares = profile.update_shares() or [0.0] * len(infos)
        self.update_s = [u * s.compute.scale for u in shares]
        self.elem_bytes = {"float32": 4, "float16": 2, "bfloat16": 2}[profile.dtype]
        self.samples = s.model.batch_size * batch_factor
        self.record = s.run.events if record_events is None else record_events
        self.events: list[tuple] = []
        self.spans: list[tuple] = []
        self.cluster = Cluster(self.net, s.network.link_profile(), startup_s=startup_s,
                               chunk_bytes=s.transport.chunk_bytes,
                               policies={"worker": cls.send_policy, "ps": cls.send_policy}, record_spans=False,
                               machine_of=s.machine_of, payload_share=PAYLOAD_SHARE,
                               queue_bytes=s.transport.queue_bytes, tbf_buckets=tbf_bucket,
                               app_shaper=s.network.backend == "app")
        self.plan = None
        self.parts_of: list[list] = [[] for _ in infos]
        self.shards: list[SimShard] = []
        if not isinstance(model, RingAllReduce):  # the strategy's own plan (a ring's groups are planned in the run)
            self.plan = cls.make_plan(infos, ps_shards=s.cluster.ps_shards, workers=self.world, seed=s.run.seed,
                                      options=self.options)
        if isinstance(model, ParameterServer):
            for p in self.plan.partitions:
                self.parts_of[self.index_of[p.key]].append(p)
            self.shards = [SimShard(self, k) for k in range(s.cluster.ps_shards)]
        # slow workers (cluster.slowdown, cluster.straggler): each rank's compute factor per iteration; a mirrored
        # ring runs at its slowest rank's pace (every step needs every rank's segment), so the one simulated rank
        # computes at the largest factor of each iteration and the others' rows get their own compute back (run)
        self.factors: list[list[float]] | None = None
        if s.cluster.slowdown or s.cluster.straggler.probability > 0:
            per_rank = [s.cluster.compute_factors(r, self.iterations, s.run.seed) or [1.0] * self.iterations
                        for r in range(self.world)]
            self.factors = per_rank
        n_sim = 1 if self.mirror else self.world
        worker_cls = SimWorker
        if isinstance(model, SplitRoles):  # CONV and FC workers run their own split passes
            from synclab.sim.split_roles import SplitRolesWorker

            if profile.boundary is None:
                raise SpecError(f"strategy.name: {self.name} needs the model profile's 'boundary' (A, T_c, T_f); "
                                f"the profile of {profile.model!r} has none")
            worker_cls = SplitRolesWorker
        self.workers = [worker_cls(self, r) for r in range(n_sim)]
        make = model_for(model)
        for w in self.workers:
            w.strategy = make(self, w)
        self.cost = None
        self.cost_fit: dict | None = None
        self.plan_record: dict | None = None
        self.t_job = 0.0
        self._ring_bytes = 0

    def compute_factor(self, rank: int, iteration: int) -> float:
        """The compute factor of simulated worker ``rank`` in ``iteration`` (the largest of all ranks' when the
        ranks are mirrored)."""
        if self.factors is None:
            return 1.0
        if self.mirror:
            return max(f[iteration - 1] for f in self.factors)
        return self.factors[rank][iteration - 1]

    def _unmirror(self, row: dict, rank: int) -> dict:
        """Rank ``rank``'s row of a mirrored ring from rank 0's (simulated at the slowest rank's pace): its own
        share of that compute, the rest of the iteration spent waiting."""
        row = {**row, "rank": rank}
        if self.factors is not None:
            it = row["iteration"]
            own = self.factors[rank][it - 1] / max(f[it - 1] for f in self.factors)
            compute = row["compute_s"] * own
            row.update(compute_s=compute, comm_wait_s=row["comm_wait_s"] + row["compute_s"] - compute)
        return row

    # -- recording ------------------------------------------------------------------------------------

    def event(self, iteration: int, rank: int, index: int, kind: str) -> None:
        if self.record and len(self.events) < EVENT_CAP:
            self.events.append((iteration, rank, index, kind, self.env.now))

    def span(self, rank: int, kind: str, iteration: int, start: float, end: float) -> None:
        if self.record and len(self.spans) < EVENT_CAP:
            self.spans.append((rank, kind, iteration, start, end))

    def ring(self, numel: int, on_done, elem_bytes: int | None = None, priority: int = 0) -> None:
        def mirror(nbytes: int) -> None:
            self._ring_bytes += nbytes
        h = self.net.host_cpu
        ring_allreduce(self.cluster, self.world, numel, elem_bytes or self.elem_bytes, on_done, mirror,
                       goodput=1.0 if h is None else h.ring_share, priority=priority)

    def node_bytes(self, node: str) -> tuple[int, int]:
        if self.mirror:
            return self._ring_bytes, self._ring_bytes
        return self.cluster.bytes_sent.get(node, 0), self.cluster.bytes_received.get(node, 0)

    # -- running --------------------------------------------------------------------------------------

    def _start_workers(self) -> None:
        self.t_job = self.env.now
        for w in self.workers:
            self.env.process(w.run())

    def run(self) -> SimResult:
        t0 = time.perf_counter()
        if getattr(self.model, "fit_cost_model", False) and self.world > 1:
            fit_ring_cost(self, self._start_workers)
        else:
            from synclab.plans.mgwfbp import CostModel

            self.cost = CostModel(0.0, 0.0)
            self._start_workers()
        self.env.run()
        wall = time.perf_counter() - t0
        rows = [r for w in self.workers for r in w.rows]
        if len(rows) != self.iterations * len(self.workers):
            raise RuntimeError(f"simulation of {self.name!r} stalled: {len(rows)} iteration records of "
                               f"{self.iterations * len(self.workers)} (a gate never opened)")
        if self.mirror and self.world > 1:
            rows = [self._unmirror(r, k) for r in rows for k in range(self.world)]
            nodes = {f"worker{k}": self._ring_bytes for k in range(self.world)}
            sent, received = nodes, dict(nodes)
        else:
            sent, received = dict(self.cluster.bytes_sent), dict(self.cluster.bytes_received)
        rows.sort(key=lambda r: (r["iteration"], r["rank"]))
        return SimResult(self.spec, rows, self.events, self.spans, sent, received, self.net.events, wall,
                         self.env.now - self.t_job, plan=self.plan_record, startup_s=self.cluster.startup_s,
                         world=self.world, host_cpu=None if self.net.host_cpu is None else self.net.host_cpu.as_dict(),
                         profile_meta={"model": self.profile.model, "batch_size": self.profile.batch_size,
                                       "device": self.profile.device,
                                       "device_name": self.profile.meta.get("device_name"),
                                       "date": self.profile.meta.get("date")})


def simulate(spec: Spec, *, startup_s: float = DEFAULT_STARTUP_S, record_events: bool | None = None,
             workers: int | None = None, host_cores: float | None = None,
             cpu_s_per_byte: float = DEFAULT_CPU_S_PER_BYTE,
             serial_s_per_byte: float = DEFAULT_SERIAL_S_PER_BYTE, shard_cpu=None,
             tbf_bucket: bool = True, tensor_s: float | None = None,
             ring_goodput: GoodputTable | None = None) -> SimResult:
    """Simulate ``spec`` (as loaded by :func:`synclab.config.load_spec`); :class:`UnsupportedStrategy` or
    :class:`~synclab.config.SpecError` when it cannot.

    ``host_cores``: model the emulator's host (every node on one machine of that many cores, each byte
    moved costing ``cpu_s_per_byte`` CPU seconds, ``serial_s_per_byte`` of them after the message is in,
    ``run.dilation`` applied: :class:`~synclab.sim.host.HostCpu`, and the shaped NICs holding the
    emulator's shaper buckets, :class:`~synclab.sim.network.TokenBucket`, unless ``tbf_bucket`` is False, and
    the all-reduce workers' runtime spending ``tensor_s`` host seconds per tensor, ``Network.tensor_job``;
    None: the measured value of the strategy's path, :func:`tensor_s_for`; and, given ``ring_goodput``
    (ranks -> the share of TCP goodput the emulator's ring reached alone by segment size,
    :func:`parse_ring_goodput`), each ring segment slowed to the share at its size, :func:`goodput_at`),
    for validation against the emulator; None (default) simulates a cluster whose nodes have their own
    CPUs and NICs."""
    if startup_s < 0:
        raise ValueError(f"startup_s must be >= 0, got {startup_s}")
    spec, notes = prepare(spec)
    result = Simulation(spec, startup_s=startup_s, record_events=record_events, workers=workers,
                        host_cores=host_cores, cpu_s_per_byte=cpu_s_per_byte,
                        serial_s_per_byte=serial_s_per_byte, shard_cpu=shard_cpu, tbf_bucket=tbf_bucket,
                        tensor_s=tensor_s, ring_goodput=ring_goodput).run()
    if shard_cpu is not None:
        notes.append(f"PS shards' host CPU modelled: push {shard_cpu.push_s * 1e9:.2f}, update "
                     f"{shard_cpu.update_s * 1e9:.2f}, reply {shard_cpu.reply_s * 1e9:.2f} ns per value")
    result.notes = notes
    return result


def load_for_simulation(path, overrides: list[str]) -> tuple[Spec, int | None]:
    """:func:`~synclab.config.load_spec` of ``path`` and ``overrides``, and the simulated worker count.

    ``cluster.workers`` is capped at what a launched cluster may have (ClusterSpec: 1024); the
    simulator goes further (MG-WFBP Fig. 10/11 reach 2048), so a larger value is taken here and
    the spec validated with the cap. Returns (spec, workers or None when the spec's count stands).
    """
    from synclab.config import load_spec, parse_override
    from synclab.config.spec import ClusterSpec

    cap = next(m.le for m in ClusterSpec.model_fields["workers"].metadata if hasattr(m, "le"))
    rest, workers = [], None
    for item in overrides:
        key, value = parse_override(item)
        if key == "cluster.workers" and isinstance(value, int) and not isinstance(value, bool) and value > cap:
            if value > MAX_SIM_WORKERS:
                raise SpecError(f"cluster.workers: the simulator takes at most {MAX_SIM_WORKERS}, got {value}")
            workers, value = value, cap
        rest.append((key, value))
    return load_spec(path, rest), workers


MAX_SIM_WORKERS = 65536
