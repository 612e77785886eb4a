"""``local``: one process, no communication, the global batch — the reference every strategy must match.

The update is ``torch.optim.SGD`` itself (not SyncLab's own update rule), so the
equivalence tests compare the distributed strategies with an independent reference.
"""

from __future__ import annotations

import torch

from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce


@register
class Local(Strategy):
    name = "local"
    single_process = True
    checkpointable = True
    sim_model = RingAllReduce(groups="none")  # no communication; the update after backward

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        self._grads: dict[int, torch.Tensor] = {}
        self._opt = torch.optim.SGD(ctx.tensors, lr=ctx.lr, momentum=ctx.momentum, weight_decay=ctx.weight_decay)

    def state_dict(self):
        return {"optimizer": self._opt.state_dict()}

    def load_state_dict(self, state):
        self._opt.load_state_dict(state["optimizer"])

    def on_gradient(self, iteration, index, grad):
        self._grads[index] = grad

    def on_backward_end(self, iteration):
        self.ctx.update(range(len(self.ctx.tensors)), self._step, None)
        self._grads.clear()
        for i in range(len(self.ctx.tensors)):
            self.ctx.mark_fresh(i)

    def _step(self) -> None:
        for i, t in enumerate(self.ctx.tensors):
            t.grad = self._grads[i]
        self._opt.step()
        for t in self.ctx.tensors:
            t.grad = None
