"""``ddp``: PyTorch DistributedDataParallel's reducer — gradient buckets all-reduced as each fills.

What PyTorch does (``torch/nn/parallel/distributed.py`` and the C++ ``Reducer`` it builds; Li et al.,
"PyTorch Distributed: Experiences on Accelerating Data Parallel Training", VLDB 2020, §3.2.3
"Gradient Bucketing" and §3.2.4 "Overlap Computation with Communication"):

- Parameters are assigned to buckets in the order their gradients become ready, which is the reverse
  of the order they were registered (forward order) — the reducer rebuilds its buckets in the order
  observed in the first backward pass, and for a static graph that is the reverse registration order.
- A bucket takes tensors until its size reaches its cap (``_compute_bucket_assignment_by_size``:
  a tensor is added, then the bucket is closed once it holds at least the cap, so a bucket may
  exceed the cap by its last tensor). The first bucket's cap is 1 MiB
  (``dist._DEFAULT_FIRST_BUCKET_BYTES``), so communication starts early in backward; every later
  bucket's cap is ``bucket_cap_mb`` (25 MiB by default).
- When the last gradient of a bucket arrives, the bucket is all-reduced (the paper's Fig. 3(b)), and
  buckets are launched in bucket order (the reducer's ``next_bucket_`` only advances in order), so a
  later bucket that fills first waits for the earlier ones.
- The reduced bucket is divided by the world size (DDP averages), then the optimizer steps.

Here the buckets are fixed by rank 0's plan (:class:`DdpPlan`, tensor sizes as float32) and each
bucket is one ring all-reduce (MG-WFBP Table 2 "Ring", T(M) = a + b·M) of a flat buffer holding its
gradients; then every worker updates the bucket's tensors itself and opens their gates. The math is
synchronous SGD, so the parameters equal ``local``'s.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

from synclab.core import ParamInfo
from synclab.plans.mgwfbp import MergePlan, group_layout
from synclab.plans.schema import Plan
from synclab.strategies.base import WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce
from synclab.strategies.wfbp import Wfbp

MIB = 1024 * 1024
FLOAT32_BYTES = 4


class DdpOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    bucket_cap_mb: float = Field(25.0, gt=0, description="cap of every bucket but the first, MiB (DDP's bucket_cap_mb)")
    first_bucket_mb: float = Field(1.0, gt=0, description="cap of the first bucket (the last layers' gradients), "
                                                          "MiB (dist._DEFAULT_FIRST_BUCKET_BYTES)")


def ddp_buckets(sizes_bytes: Sequence[int], *, cap_bytes: float, first_cap_bytes: float) -> MergePlan:
    """DDP's bucket assignment: tensors taken in backward order (L-1 .. 0) into a bucket until it holds at
    least its cap (``first_cap_bytes`` for the first bucket, ``cap_bytes`` after), then a new bucket."""
    groups: list[tuple[int, ...]] = []
    bucket: list[int] = []
    size, cap = 0, first_cap_bytes
    for i in range(len(sizes_bytes) - 1, -1, -1):
        bucket.append(i)
        size += sizes_bytes[i]
        if size >= cap:
            groups.append(tuple(bucket))
            bucket, size, cap = [], 0, cap_bytes
    if bucket:
        groups.append(tuple(bucket))
    return MergePlan(tuple(groups))


def plan_buckets(numels: Sequence[int], options: DdpOptions) -> MergePlan:
    """The buckets ``options`` give a model of these float32 tensors (elements, forward order)."""
    return ddp_buckets([n * FLOAT32_BYTES for n in numels], cap_bytes=options.bucket_cap_mb * MIB,
                       first_cap_bytes=options.first_bucket_mb * MIB)


class DdpPlan(Plan):
    """The buckets in the order they are all-reduced, each its tensors in backward order, and their sizes."""

    bucket_cap_mb: float = Field(gt=0)
    first_bucket_mb: float = Field(gt=0)
    buckets: tuple[tuple[int, ...], ...] = Field(min_length=1)
    bucket_bytes: tuple[int, ...]


@register
class Ddp(Wfbp):
    """``ddp``: PyTorch DDP's reducer, reverse-order gradient buckets each all-reduced once full (Li et al., VLDB 2020 §3.2).

    Buckets hold at least ``bucket_cap_mb`` (the first ``first_bucket_mb``) and are launched in order."""

    name = "ddp"
    Options = DdpOptions
    Plan = DdpPlan
    sim_model = RingAllReduce(groups="buckets", buckets=plan_buckets)

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards, workers, seed, options: DdpOptions):
        sizes = [p.numel * FLOAT32_BYTES for p in params]
        plan = plan_buckets([p.numel for p in params], options)
        return cls.Plan(bucket_cap_mb=options.bucket_cap_mb, first_bucket_mb=options.first_bucket_mb,
                        buckets=plan.groups, bucket_bytes=tuple(sum(sizes[i] for i in g) for g in plan.groups))

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        numels = [p.numel for p in ctx.params]
        self._layout = group_layout(MergePlan(tuple(ctx.plan.buckets)), numels)
        first = ctx.tensors[0]
        flat = torch.empty(sum(numels), dtype=first.dtype, device=first.device)
        self._buckets, start = [], 0
        for slots in self._layout:
            size = sum(n for _, _, n in slots)
            self._buckets.append(flat[start:start + size])
            start += size
        self._slot_of = {t: (b, offset, n) for b, slots in enumerate(self._layout) for t, offset, n in slots}
        self._missing = [len(slots) for slots in self._layout]
        self._turn = 0  # the next bucket to launch: buckets go in order

    def on_gradient(self, iteration, index, grad):
        b, offset, numel = self._slot_of[index]
        self._buckets[b][offset:offset + numel].copy_(grad.reshape(-1))
        self._missing[b] -= 1
        while self._turn < len(self._layout) and self._missing[self._turn] == 0:
            self._reduce(iteration, self._turn)
            self._missing[self._turn] = len(self._layout[self._turn])
            self._turn += 1
        if self._turn == len(self._layout):
            self._turn = 0

    def _reduce(self, iteration: int, b: int) -> None:
        c, slots, flat = self.ctx, self._layout[b], self._buckets[b]
        for tensor, _, _ in slots:
            c.record_event(iteration, tensor, "send_start")
        self.allreduce_mean_(flat, f"ddp/bucket{b}", iteration)
        for tensor, _, _ in slots:
            c.record_event(iteration, tensor, "send_end")
        for tensor, offset, numel in slots:
            self._bufs[tensor] = c.sgd_(tensor, flat[offset:offset + numel], self._bufs.get(tensor))
            c.mark_fresh(tensor)
