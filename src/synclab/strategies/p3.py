"""``p3``: priority-based parameter propagation (Jayarajan et al., P3, §4 and §4.2); ``p3-slicing``: slicing alone.

P3 keeps the KVStore's training algorithm and changes only when bytes move:

- *Parameter slicing* (§4.2): every tensor is cut into slices of at most
  ``slice_params`` parameters (50,000 by default, the peak of Fig. 12, §5.6),
  and the slices go to the shards round robin "for load balancing"
  (:func:`synclab.plans.slicing.slice_tensors`).
- *Priority* (§4): "slices inherit their priority values from its parent
  layer", and a layer's priority is its place in the forward pass: the first
  layer gets the highest priority (the smallest number here), because the next
  forward pass consumes it first.
- The worker's send queue is a priority queue: a higher-priority slice
  overtakes at the next chunk boundary (``send_policy = "priority"``; the
  transport's :class:`~synclab.transport.scheduler.SendScheduler`).
- The server takes received slices from a priority queue, so "highest priority
  parameters are processed first" (``serve_order = "priority"``,
  :mod:`synclab.ps.serve_queue`), and its send queues are priority queues too.
- No notify, no pull: "P3Server immediately broadcasts the updated parameters
  to all workers once it has received all of the updates" (``server_mode =
  "broadcast"``).
- The worker marks each tensor fresh once all its slices arrived, so the next
  forward pass of layer l starts as soon as l's slices are in (the per-layer
  gate), whatever the later layers are doing.

``p3-slicing`` is the middle curve of Fig. 7 ("only using the parameter slicing
optimization"): the same slices, shards and broadcast, every priority equal, so
worker and server queues are FIFO. It keeps the broadcast because §4.2 makes
removing notify + pull part of what lets slices travel independently ("this
modification was necessary because MXNet only issues a pull request once it has
received the update notification for all the slices of a layer"); so the two
strategies differ in exactly one thing, priority, and ``p3-slicing`` against
``ps`` shows what slicing (with its broadcast) buys.
"""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field

from synclab.core import ParamInfo
from synclab.plans.schema import ServerPlan
from synclab.plans.sharding import Partition
from synclab.plans.slicing import DEFAULT_SLICE_PARAMS, slice_tensors
from synclab.strategies.ps import PsStrategy
from synclab.strategies.registry import register


class P3Options(BaseModel):
    model_config = ConfigDict(extra="forbid")
    slice_params: int = Field(DEFAULT_SLICE_PARAMS, ge=1, description="largest slice, in parameters (P3 §5.6)")


def p3_partitions(params: list[ParamInfo], *, shards: int, slice_params: int, prioritized: bool) -> list[Partition]:
    """Slices of every tensor as shard partitions; priority = the layer's forward position, or 0 for all."""
    slices = slice_tensors([p.numel for p in params], slice_params, shards=shards)
    return [Partition(params[s.key].name, s.slice_index, s.offset, s.length, s.shard,
                      params[s.key].layer if prioritized else 0)
            for s in slices]


class P3Plan(ServerPlan):
    """The KVStore placement of P3's slices (§4.2) and the slice size they were cut at."""

    slice_params: int = Field(ge=1)


@register
class P3(PsStrategy):
    name = "p3"
    Options = P3Options
    send_policy = "priority"
    server_mode = "broadcast"
    Plan = P3Plan
    prioritized: ClassVar[bool] = True
    checkpointable = True   # the optimizer state lives on the shards (Shard.state_dict)

    @classmethod
    def make_plan(cls, params, *, ps_shards, workers, seed, options):
        parts = p3_partitions(params, shards=ps_shards, slice_params=options.slice_params,
                              prioritized=cls.prioritized)
        return cls.Plan(partitions=tuple(parts), server_mode=cls.server_mode,
                        serve_order="priority" if cls.prioritized else "arrival", max_ahead=1,
                        slice_params=options.slice_params)


@register
class P3Slicing(P3):
    name = "p3-slicing"
    send_policy = "fifo"
    prioritized = False
