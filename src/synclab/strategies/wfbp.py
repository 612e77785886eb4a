"""``wfbp``: wait-free back-propagation with layer-wise ring all-reduce (MG-WFBP §2.3).

Each gradient is all-reduced among the workers as soon as backward produces it;
all-reduces run one after another in backward order on the communication thread
(the cost of each is T(M) = a + b·M, MG-WFBP eq. 1). Every worker then applies
the optimizer to that tensor itself and opens its gate.
"""

from __future__ import annotations

import torch

from synclab.collective.ring import ring_allreduce_
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce


@register
class Wfbp(Strategy):
    name = "wfbp"
    checkpointable = True
    sim_model = RingAllReduce(groups="per-tensor")

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        self._bufs: dict[int, torch.Tensor | None] = {}
        self._next = (ctx.rank + 1) % ctx.world
        self._prev_name = ctx.worker_names.get((ctx.rank - 1) % ctx.world, "")

    def peers(self):
        return {self._next} if self.ctx.world > 1 else set()

    def state_dict(self):
        return {"momentum": dict(self._bufs)}

    def load_state_dict(self, state):
        self._bufs = dict(state["momentum"])

    def allreduce_mean_(self, flat: torch.Tensor, key: str, iteration: int) -> torch.Tensor:
        c = self.ctx
        ring_allreduce_(flat, rank=c.rank, world=c.world, key=key, iteration=iteration,
                        to_next=c.peer_links.get(self._next), inbox=c.inbox, prev_name=self._prev_name)
        return flat.div_(c.world)

    def on_gradient(self, iteration, index, grad):
        c = self.ctx
        flat = grad.reshape(-1).contiguous()
        c.record_event(iteration, index, "send_start")
        self.allreduce_mean_(flat, c.params[index].name, iteration)
        c.record_event(iteration, index, "send_end")
        self._bufs[index] = c.sgd_(index, flat, self._bufs.get(index))
        c.mark_fresh(index)
