"""``stanza``: layer separation into CONV workers and FC workers (Wu et al., Stanza §3.2, §4–5).

Roles. Of the N workers, ranks ``0..n_c-1`` are CONV workers and ranks
``n_c..N-1`` FC workers. A CONV worker reads its own data shard (``data_shard
= (rank, n_c)``, so the n_c shards together are the global batch of ``n_c · K``
samples) and trains the model's ``features``; an FC worker reads no data and
trains its ``classifier``. The model must be ``classifier(flatten(features(x)))``
(smallcnn, AlexNet, VGG, ResNets, DenseNets; §3.2 splits after the last
pooling layer, which is where ``features`` ends). FC worker j serves a
contiguous block of CONV workers, the blocks as equal as integers allow
(§4.1.3, §5.1: "the CONV workers are equally partitioned into n_f groups").

One iteration, BSP (§5.2):

1. CONV worker: forward through ``features``; ``push_activation``: the
   boundary activations (and the batch's labels, so the FC worker can compute
   the loss) go to its FC worker (§4.1.1, many-to-one).
2. FC worker: concatenates its CONV workers' activations in rank order,
   forward through ``classifier``, loss, backward; sends each CONV worker the
   gradients of its activations (and the mean loss of its samples, for the
   record) — one-to-many.
3. CONV worker (``pull_fc``): backward through ``features`` from those
   gradients; ``pull_grad``: the CONV gradients are all-reduced among the CONV
   workers by recursive doubling, surplus rule included (§4.1.2,
   :mod:`synclab.collective.recursive_doubling`), one message of all P_c values
   per round, as eq. 3 charges.
4. FC workers with n_f > 1 all-reduce the FC gradients the same way among
   themselves, right after sending the activation gradients, so it overlaps
   the CONV workers' backward and exchange (§4.1.3).
5. Every worker applies momentum SGD to the part it trains and opens its gates;
   the next forward waits on them.

Loss scaling, so that the update equals ``local`` on the global batch of
B = n_c · K samples: the loss is the mean over the global batch. FC worker j
holds B_j of those samples and back-propagates ``mean_j · B_j / B`` (with one
FC worker, the plain mean); every per-sample gradient is then ``∇l / B``,
in the FC parameters and in the activation gradients the CONV workers
back-propagate. The all-reduces therefore *sum* (no division afterwards).

Node assignment (§4.2): ``strategy.fc_workers`` fixes n_f. Otherwise n_f
maximises eq. 4's throughput n_c K / t_s subject to n_c + n_f = N (eq. 5),
with t_s from eq. 2–3, T_c, T_f, A, K and P_c from the model profile in
``strategy.profile`` and B from ``strategy.bandwidth``: the paper's controller
solves eq. 5 from profiled constants (§5.1, "profiled offline"). The search
also keeps n_f <= n_c: §4.1.3 gives each FC worker an equal share of the CONV
workers, so an FC worker with none would idle while eq. 2 counts it as
sharing the FC work. Rounds of the CONV all-reduce are floor(log2 n_c) + 2 off
powers of two, what §4.1.2's algorithm takes; eq. 3 prints ceil(·) + 2
(:func:`synclab.plans.stanza.conv_allreduce_rounds`). ``strategy.reading:
as-printed`` reads both as printed instead (a choice of n_f > n_c is refused:
it cannot run). Rank 0 decides in
:meth:`Stanza.make_plan` and records the decision in ``plan.json``.

The whole model on rank 0. CONV and FC workers keep different parts up to
date, and rank 0 is a CONV worker; after the last iteration the first FC
worker sends its FC parameters to rank 0 (:meth:`Stanza.on_train_end`), so
``params.pt`` holds the full trained model. Until then each worker's
parameter checksum covers a model that is current only in its own part.

Records. ``compute_s`` is time spent computing (CONV: data, forward,
backward; FC: its forward and backward), ``comm_wait_s`` the rest of the
iteration — for an FC worker that includes waiting for the CONV workers'
forward passes. Only CONV workers count samples; every worker reports the
mean loss of the samples it saw (an FC worker: its combined batch).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from synclab.collective.recursive_doubling import recursive_doubling_allreduce_, recursive_doubling_peers
from synclab.collective.schedules import segment_bounds
from synclab.compute.engine import EngineBase
from synclab.compute.profile import Boundary, ModelProfileError, load_model_profile
from synclab.core import IterationTiming, ParamInfo
from synclab.plans.schema import Plan
from synclab.plans.stanza import PsProfile, StanzaProfile, choose_fc_workers, stanza_iteration_time, stanza_throughput
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import SplitRoles
from synclab.units import parse_rate_bps
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId

FC_PREFIX = "classifier."
CONV_PREFIX = "features."


@dataclass(frozen=True)
class BoundaryProfile:
    """What Stanza's and the PS model need from a model profile: its ``batch_size`` K and ``boundary``.

    ``boundary.conv_seconds`` is T_c (CONV forward+backward per batch),
    ``fc_seconds`` T_f (FC forward+backward for one CONV worker's batch),
    ``activations_per_sample`` A, ``conv_params`` P_c and ``fc_params`` P_f.
    """

    batch_size: int
    boundary: Boundary

    def stanza(self, bandwidth_bps: float) -> StanzaProfile:
        b = self.boundary
        return StanzaProfile(conv_time_s=b.conv_seconds, fc_time_s=b.fc_seconds, activations=b.activations_per_sample,
                             batch_size=self.batch_size, conv_params=b.conv_params, bandwidth_bps=bandwidth_bps)

    def ps(self, bandwidth_bps: float) -> PsProfile:
        """PS model (eq. 6): P = P_c + P_f and T_ps = T_c + T_f — one worker's forward and backward of
        the whole model on its batch, from the same measurement Stanza's constants come from."""
        b = self.boundary
        return PsProfile(compute_time_s=b.conv_seconds + b.fc_seconds, params=b.conv_params + b.fc_params,
                         batch_size=self.batch_size, bandwidth_bps=bandwidth_bps)


def read_profile(path: Path | str, *, partial: bool = False) -> BoundaryProfile:
    """Stanza's constants from a model profile file; ``partial``: the file may hold only ``batch_size`` and
    ``boundary`` (e.g. a paper's figures). :class:`ModelProfileError` names the file and the field."""
    profile = load_model_profile(path, partial=partial, require=("batch_size", "boundary"))
    return BoundaryProfile(batch_size=profile.batch_size, boundary=profile.boundary)


def conv_groups(n_c: int, n_f: int) -> list[range]:
    """CONV ranks served by each FC worker: contiguous blocks, sizes differing by at most one (§4.1.3)."""
    return [range(lo, hi) for lo, hi in segment_bounds(n_c, n_f)]


def split_params(params: list[ParamInfo]) -> int:
    """Number of CONV tensors (the ``features.*`` ones, first in forward order); the rest are ``classifier.*``."""
    boundary = sum(1 for p in params if not p.name.startswith(FC_PREFIX))
    for p in params:
        in_fc = p.index >= boundary
        if p.name.startswith(FC_PREFIX) != in_fc or not (in_fc or p.name.startswith(CONV_PREFIX)):
            raise ValueError(f"stanza needs a model computed as classifier(flatten(features(x))), with the "
                             f"'features' parameters before the 'classifier' ones; parameter {p.name!r} does not fit")
    if boundary == 0 or boundary == len(params):
        raise ValueError("stanza needs a model with both a CONV part ('features') and an FC part ('classifier')")
    return boundary


class StanzaPlan(Plan):
    """Stanza's node assignment (§4.1.3, eq. 2-5) and the CONV/FC boundary."""

    boundary: int = Field(ge=1)
    conv_workers: int = Field(ge=1)
    fc_workers: int = Field(ge=1)
    assigned_by: Literal["strategy.fc_workers", "eq. 2-5"]
    profile: str | None = None
    bandwidth_bps: float | None = None
    predicted_iteration_seconds: float | None = None
    predicted_throughput_samples_per_s: float | None = None


class StanzaOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    fc_workers: int | None = Field(None, ge=1, description="n_f; unset: chosen by eq. 2-5 from profile and bandwidth")
    # read by rank 0 alone, in make_plan: the other workers' hosts need not have the file
    profile: Path | None = Field(None, description="model profile JSON whose 'boundary' gives T_c, T_f, A, P_c, K")
    bandwidth: str | int | None = Field(None, description="B of eq. 3 (e.g. '1gbit'), usually network.rate")
    reading: Literal["algorithm", "as-printed"] = Field(
        "algorithm", description="eq. 3/5 as the algorithm runs (floor(log2 n_c)+2 rounds, n_f <= n_c) or "
                                 "'as-printed' (ceil(log2 n_c)+2, any n_f); plans.stanza.READINGS")

    @field_validator("bandwidth")
    @classmethod
    def _bandwidth(cls, v):
        if v is not None and parse_rate_bps(v) <= 0:
            raise ValueError(f"must be a rate > 0, got {v!r}")
        return v

    @model_validator(mode="after")
    def _source(self):
        if self.fc_workers is None and (self.profile is None or self.bandwidth is None):
            raise ValueError("set strategy.fc_workers, or strategy.profile and strategy.bandwidth "
                             "for the node assignment of eq. 2-5")
        return self


@register
class Stanza(Strategy):
    """``stanza``: CONV workers and FC workers, recursive-doubling all-reduces, BSP (Stanza §4–5)."""

    name = "stanza"
    Options = StanzaOptions
    Plan = StanzaPlan
    rank0_holds_model = False  # FC parameters reach rank 0 only in on_train_end
    sim_model = SplitRoles(groups=conv_groups)
    closed_form = "eq3"  # eq. 2-5
    short_run = ("strategy.fc_workers=1",)

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards: int, workers: int, seed: int,
                  options: StanzaOptions) -> StanzaPlan:
        boundary = split_params(params)
        if workers < 2:
            raise ValueError(f"stanza needs at least 2 workers (a CONV and an FC worker), got {workers}")
        if options.fc_workers is not None:
            n_f = options.fc_workers
            if not n_f <= workers - n_f:
                raise ValueError(f"strategy.fc_workers={n_f} leaves {workers - n_f} CONV worker(s) for {workers} "
                                 f"workers; each FC worker needs at least one (§4.1.3)")
            return cls.Plan(boundary=boundary, conv_workers=workers - n_f, fc_workers=n_f,
                            assigned_by="strategy.fc_workers")
        try:
            profile = read_profile(options.profile).stanza(parse_rate_bps(options.bandwidth))
        except ModelProfileError as e:
            raise ModelProfileError(f"strategy.profile: {e}") from None
        n_f = choose_fc_workers(workers, profile, reading=options.reading)
        n_c = workers - n_f
        if n_f > n_c:
            raise ValueError(f"eq. 5 read as printed gives {n_f} FC workers for {n_c} CONV worker(s), which cannot "
                             f"run: each FC worker needs at least one CONV worker (§4.1.3); use "
                             f"strategy.reading=algorithm, or fix strategy.fc_workers")
        return cls.Plan(boundary=boundary, conv_workers=n_c, fc_workers=n_f,
                        assigned_by="eq. 2-5" + (" as printed" if options.reading == "as-printed" else ""),
                        profile=str(options.profile), bandwidth_bps=profile.bandwidth_bps,
                        predicted_iteration_seconds=stanza_iteration_time(n_c, n_f, profile, options.reading),
                        predicted_throughput_samples_per_s=stanza_throughput(n_c, n_f, profile, options.reading))

    @classmethod
    def max_payload_bytes(cls, plan: StanzaPlan, params, *, batch_size, options, element_bytes=4):
        """Whole-part all-reduces and the FC gather (at most the model), or one CONV worker's batch of
        activations (their gradients are as large) and labels. The activation width per sample is the
        input width of the classifier's first weight matrix, since the model is classifier(flatten(features(x)))."""
        total = sum(p.numel for p in params) * element_bytes
        first_fc = next((p for p in params[plan.boundary:] if len(p.shape) == 2), None)
        per_sample = first_fc.shape[1] if first_fc is not None else max((p.numel for p in params), default=0)
        return max(total, batch_size * per_sample * element_bytes, batch_size * 8)

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        plan: StanzaPlan = ctx.plan
        self.n_c, self.n_f, self.boundary = plan.conv_workers, plan.fc_workers, plan.boundary
        if self.n_c + self.n_f != ctx.world:
            raise ValueError(f"plan has {self.n_c} CONV + {self.n_f} FC workers, the cluster {ctx.world}")
        self.is_fc = ctx.rank >= self.n_c
        groups = conv_groups(self.n_c, self.n_f)
        self.fc_of = {r: self.n_c + j for j, g in enumerate(groups) for r in g}  # CONV rank -> its FC worker
        self.served = list(groups[ctx.rank - self.n_c]) if self.is_fc else []  # an FC worker's CONV ranks
        # the workers this one all-reduces with, and the parameters it trains
        self.group = list(range(self.n_c, ctx.world)) if self.is_fc else list(range(self.n_c))
        self.own = list(range(self.boundary, len(ctx.params))) if self.is_fc else list(range(self.boundary))
        self.key = "fc" if self.is_fc else "conv"
        self.global_batch = self.n_c * ctx.batch_size  # B = n_c · K
        self._offsets: dict[int, tuple[int, int]] = {}
        lo = 0
        for i in self.own:
            self._offsets[i] = (lo, lo + ctx.params[i].numel)
            lo += ctx.params[i].numel
        self._flat = torch.empty(lo, dtype=ctx.tensors[self.own[0]].dtype, device=ctx.tensors[self.own[0]].device)
        self._bufs: dict[int, torch.Tensor | None] = {}

    def peers(self) -> set[int]:
        me = self.group.index(self.ctx.rank)
        out = {self.group[p] for p in recursive_doubling_peers(me, len(self.group))}
        out |= set(self.served) if self.is_fc else {self.fc_of[self.ctx.rank]}
        return out

    def setup(self) -> None:
        c = self.ctx
        if c.rank == 0 and c.run_dir is not None:
            roles = {c.worker_names.get(r, str(r)): ("fc" if r >= self.n_c else "conv") for r in range(c.world)}
            serves = {c.worker_names.get(self.n_c + j, str(self.n_c + j)): [c.worker_names.get(r, str(r)) for r in g]
                      for j, g in enumerate(conv_groups(self.n_c, self.n_f))}
            (c.run_dir / "plan.json").write_text(json.dumps({**c.plan.model_dump(), "roles": roles, "serves": serves}, indent=2))

    def data_shard(self) -> tuple[int, int] | None:
        return None if self.is_fc else (self.ctx.rank, self.n_c)

    def run_iteration(self, engine: EngineBase, iteration: int, x, y, start: float) -> IterationTiming:
        """One iteration of this worker's part, through the engine's split passes (real or replayed alike)."""
        engine.begin_iteration(iteration, start)
        if self.is_fc:
            loss, samples = self._fc_iteration(engine, iteration), 0
        else:
            loss, samples = self._conv_iteration(engine, iteration, x, y)
        return engine.end_iteration(loss, samples)

    def _conv_iteration(self, engine: EngineBase, iteration: int, x, y) -> tuple[float, int]:
        c = self.ctx
        fc_rank = self.fc_of[c.rank]
        fc_name = c.worker_names[fc_rank]
        grads = c.inbox.expect(fc_name, MessageId(pb.ACTIVATION_GRAD, "activations", 0, iteration))
        loss = c.inbox.expect(fc_name, MessageId(pb.ACTIVATION_GRAD, "loss", 0, iteration))
        boundary = engine.head_forward(x, y)
        link = c.peer_links[fc_rank]
        link.send(Message(MessageId(pb.ACTIVATION, "activations", 0, iteration), boundary.activations))
        link.send(Message(MessageId(pb.ACTIVATION, "labels", 0, iteration), boundary.labels))
        with engine.waiting():  # pull_fc
            grad = grads.result().tensor
        engine.head_backward(grad)
        with engine.waiting():
            loss_value = float(loss.result().tensor)
        return loss_value, int(boundary.activations.shape[0])

    def _fc_iteration(self, engine: EngineBase, iteration: int) -> float:
        c = self.ctx
        names = [c.worker_names[r] for r in self.served]
        acts = [c.inbox.expect(n, MessageId(pb.ACTIVATION, "activations", 0, iteration)) for n in names]
        labels = [c.inbox.expect(n, MessageId(pb.ACTIVATION, "labels", 0, iteration)) for n in names]
        with engine.waiting():  # push_activation of every served CONV worker
            parts = [f.result().tensor for f in acts]
            ys = [f.result().tensor for f in labels]
        share = sum(len(y) for y in ys) / self.global_batch  # B_j / B: the global loss is the sum of the shares
        out = engine.tail_step(parts, ys, share)  # loss: mean over this FC worker's B_j samples
        for r, grad, part_loss in zip(self.served, out.input_grads, out.losses):
            link = c.peer_links[r]
            link.send(Message(MessageId(pb.ACTIVATION_GRAD, "activations", 0, iteration), grad))
            link.send(Message(MessageId(pb.ACTIVATION_GRAD, "loss", 0, iteration), part_loss))
        return out.loss

    def on_gradient(self, iteration: int, index: int, grad: torch.Tensor) -> None:
        span = self._offsets.get(index)
        if span is None:
            raise RuntimeError(f"stanza: gradient of {self.ctx.params[index].name!r} on a "
                               f"{'FC' if self.is_fc else 'CONV'} worker, which does not train it")
        self._flat[span[0]:span[1]].copy_(grad.reshape(-1))

    def on_backward_end(self, iteration: int) -> None:
        """pull_grad (§5.2): one recursive-doubling all-reduce of all this role's gradients, then SGD."""
        c = self.ctx
        for i in self.own:
            c.record_event(iteration, i, "send_start")
        recursive_doubling_allreduce_(self._flat, group=self.group, rank=c.rank, key=self.key, iteration=iteration,
                                      links=c.peer_links, inbox=c.inbox, names=c.worker_names)
        for i in self.own:
            c.record_event(iteration, i, "send_end")
        for i in self.own:
            lo, hi = self._offsets[i]
            self._bufs[i] = c.sgd_(i, self._flat[lo:hi], self._bufs.get(i))
            c.mark_fresh(i)

    def on_train_end(self) -> None:
        """The first FC worker hands its FC parameters to rank 0, a CONV worker (FC workers hold the same bits)."""
        c = self.ctx
        sender = self.n_c
        mid = MessageId(pb.PARAMS, "classifier", 0, 0)
        if c.rank == sender:
            flat = torch.cat([c.tensors[i].detach().reshape(-1) for i in self.own])
            c.peer_links[0].send(Message(mid, flat)).result()
        elif c.rank == 0:
            flat = c.inbox.expect(c.worker_names[sender], mid).result().tensor.to(self._flat.device)
            lo = 0
            with torch.no_grad():
                for i in range(self.boundary, len(c.params)):
                    t = c.tensors[i]
                    t.copy_(flat[lo:lo + t.numel()].view_as(t))
                    lo += t.numel()
