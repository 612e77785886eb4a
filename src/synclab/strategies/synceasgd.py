"""``synceasgd``: single-layer communication, one merged all-reduce after backward (MG-WFBP §2.4, Fig. 1c).

During backward nothing is sent: each gradient is copied into its slot of one
flat buffer allocated once for the whole model. When the last gradient is in
(``on_backward_end``) the buffer is all-reduced in a single ring all-reduce —
one start-up cost a per iteration instead of one per tensor, but no overlap
with computation, so t_iter = t_f + t_b + t_c (eq. 9) with t_c = T(M) = a + b·M
(eq. 10) for M the whole model. Then every worker averages, applies the
optimizer to each tensor from its slot, and opens the gates.
"""

from __future__ import annotations

import torch

from synclab.collective.ring import ring_allreduce_
from synclab.plans.mgwfbp import group_layout, synceasgd_plan
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce

_KEY = "synceasgd/all"


@register
class SyncEasgd(Strategy):
    name = "synceasgd"
    checkpointable = True
    sim_model = RingAllReduce(groups="whole-model")

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        numels = [p.numel for p in ctx.params]
        (slots,) = group_layout(synceasgd_plan(len(numels)), numels)
        self._slot_of = {tensor: (offset, numel) for tensor, offset, numel in slots}
        first = ctx.tensors[0]
        self._flat = torch.zeros(sum(numels), dtype=first.dtype, device=first.device)
        self._momentum: dict[int, torch.Tensor | None] = {}
        self._next = (ctx.rank + 1) % ctx.world
        self._prev_name = ctx.worker_names.get((ctx.rank - 1) % ctx.world, "")

    def peers(self):
        return {self._next} if self.ctx.world > 1 else set()

    def state_dict(self):
        return {"momentum": dict(self._momentum)}

    def load_state_dict(self, state):
        self._momentum = dict(state["momentum"])

    def _view(self, index: int) -> torch.Tensor:
        offset, numel = self._slot_of[index]
        return self._flat[offset:offset + numel]

    def on_gradient(self, iteration, index, grad):
        self._view(index).copy_(grad.reshape(-1))

    def on_backward_end(self, iteration):
        c = self.ctx
        indices = range(len(c.params))
        for i in indices:
            c.record_event(iteration, i, "send_start")
        ring_allreduce_(self._flat, rank=c.rank, world=c.world, key=_KEY, iteration=iteration,
                        to_next=c.peer_links.get(self._next), inbox=c.inbox, prev_name=self._prev_name)
        self._flat.div_(c.world)
        for i in indices:
            c.record_event(iteration, i, "send_end")
        for i in indices:  # forward order: the first layer's gate opens first
            self._momentum[i] = c.sgd_(i, self._view(i), self._momentum.get(i))
            c.mark_fresh(i)
