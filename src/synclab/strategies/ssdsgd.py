"""``ssdsgd``: Several Steps Delay SGD (Xu et al., SSD-SGD, §2.3, §3, Algorithms 1–2).

Workers:

- Warm-up (§3.1; Algorithm 1 lines 3–14): ``warmup`` iterations of synchronous
  SGD — push every gradient, pull the updated weights, and start the next
  forward pass of a layer only once its weights are back.
- Steps delay (Algorithm 1 lines 15–27): push every gradient every iteration,
  then move the local weights w' with the GLU update (eq. 8, descent form,
  :func:`synclab.plans.ssdsgd.glu_local_update`) and open the layer's gate at
  once: the next forward pass never waits for the servers. Every k-th iteration
  (d % k == k − 1, with d the local updates so far) the worker also pulls the
  global weights into w' (line 22). The devices keep the GLU result for the next
  iteration's compute (line 21, "Broadcast and Pull … can be parallelized"; §2.2:
  "training task of iteration n+k can still be launched directly before
  retrieving the update weights. The retrieved parameters will be used for the
  local update operations in iteration n+k"), so the pulled weights are the
  starting point of the next local update. That update waits for them, tensor by
  tensor, which is the only place a worker ever waits for the servers after the
  warm-up.
- pre_weight (Algorithm 2) is set to w' at the first local update and refreshed
  to w' (then the weights pulled one step before) every k local updates, after
  grad_sync has used it (§3.3): grad_sync = (pre_weight − w')·(1 − m)/(lr·k).

Servers (:mod:`synclab.ps.shard`, mode ``pull``): "The process of parameter
server keeps unchanged when compared to SSGD" (§3.4; §3.5: "no modification is
needed in the parameter server side"), i.e. eq. 6: they wait for every worker's
gradient of an iteration, average, and apply momentum SGD — only the pulls
become rarer. A pull for iteration t is answered once iteration t has been
applied. Since a worker never waits for the others between pulls, a shard
accepts pushes up to k + 1 iterations ahead of the last applied one.

Defaults: α = 2.0, β = 0.5, loc_lr = 4·lr, from the paper's grid search (§4.1).
The paper warms up for 500 iterations (§4.2, Fig. 4: 100 or 200 cost accuracy,
300 or more matched SSGD); the default here is 10, for short speed runs of a
few dozen iterations that should spend most of their time in the delay stage.
Any accuracy statement must warm up as the paper does: ``strategy.warmup=500``
at the paper's batch, or the same ~5 epochs at another
(``studies/accuracy_digits.py``). Default k = 2, the best test accuracy on
ResNet-20 (Table 2).
"""

from __future__ import annotations

from concurrent.futures import Future

import torch
from pydantic import BaseModel, ConfigDict, Field

from synclab.plans.schema import ServerPlan
from synclab.plans.ssdsgd import SsdSchedule, glu_local_update
from synclab.strategies.base import WorkerContext
from synclab.strategies.ps import PsStrategy
from synclab.strategies.registry import register
from synclab.strategies.simmodel import ParameterServer

PAPER_WARMUP = 500  # SSD-SGD §4.2


class SsdPlan(ServerPlan):
    """The PS placement plus Algorithm 1's warm-up length and pull period k."""

    warmup: int = Field(ge=0)
    k: int = Field(ge=1)


class SsdSgdOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    warmup: int = Field(10, ge=0, description=f"synchronous SGD iterations first (paper: {PAPER_WARMUP}, ~5 epochs; "
                                              f"10 is for short speed runs, not for accuracy)")
    k: int = Field(2, ge=1, description="pull the global weights every k iterations after the warm-up")
    alpha: float = Field(2.0, ge=0, description="weight of the local gradient in GLU (eq. 8)")
    beta: float = Field(0.5, ge=0, description="weight of grad_sync in GLU (eq. 8)")
    loc_lr: float | None = Field(None, gt=0, description="local learning rate; None: 4 x optimizer.lr (§4.1)")


@register
class SsdSgd(PsStrategy):
    name = "ssdsgd"
    Options = SsdSgdOptions
    server_mode = "pull"
    Plan = SsdPlan
    sim_model = ParameterServer(client="scheduled-pull", schedule=lambda o: SsdSchedule(o.warmup, o.k))
    short_run = ("strategy.warmup=3", "strategy.k=2")
    lockstep = False  # local iterations run up to k ahead of the others (the summary counts each worker's pace)
    final_pull_timeout_s: float = 60.0

    @classmethod
    def paper_label(cls, overrides, lr):
        return f"SSD-SGD k = {overrides.get('strategy.k', '?')}"

    @classmethod
    def make_plan(cls, params, *, ps_shards, workers, seed, options):
        return cls.kvstore_plan(params, ps_shards, seed, max_ahead=options.k + 1, warmup=options.warmup,
                                k=options.k)

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        o = ctx.options
        self.schedule = SsdSchedule(o.warmup, o.k)
        self.k, self.alpha, self.beta = o.k, o.alpha, o.beta
        self.loc_lr = o.loc_lr if o.loc_lr is not None else 4 * ctx.lr
        n = len(ctx.params)
        self._local: list[torch.Tensor | None] = [None] * n       # w': the local weights, flat
        self._pre_weight: list[torch.Tensor | None] = [None] * n
        self._pulls: list[Future | None] = [None] * n               # the latest pull into w', per tensor
        self._parked: list[tuple[int, int, torch.Tensor]] = []      # (iteration, index, grad) awaiting a pull

    def on_gradient(self, iteration, index, grad):
        self.client.push(iteration, index, grad)
        if self.schedule.is_warmup(iteration - 1):  # Algorithm 1 counts iterations from 0
            self.client.pull(iteration, index)       # lands in the live tensor and opens its gate
            return
        pull = self._pulls[index]
        if pull is not None and not pull.done():     # w' is still arriving: update after the other pushes left
            self._parked.append((iteration, index, grad))
            return
        self._local_update(iteration, index, grad)

    def on_backward_end(self, iteration):
        """Local updates that waited for their pulls; the next forward pass needs them, the pushes did not."""
        parked, self._parked = self._parked, []
        for it, index, grad in parked:
            self._pulls[index].result()
            self._local_update(it, index, grad)

    def _local_update(self, iteration: int, index: int, grad: torch.Tensor) -> None:
        """Algorithm 1 lines 18–22 and Algorithm 2 for one tensor; w' holds what it should."""
        c = self.ctx
        step = self.schedule.step(iteration - 1)
        live = c.tensors[index]
        if step.init_pre_weight:  # first local update: w' is the last warm-up pull, still in the live tensor
            # w' and pre_weight start as the live tensor itself, not copies: a copy costs a model's worth of memory
            # per worker (VGG-16 at 16 workers, 1199-1284 MiB per worker against 810-825 MiB in the warm-up, ran a
            # 24 GB host out of memory: docs/validation/s27-ssdsgd-16w-memory). The GLU step copies only what must
            # outlive the live tensor's next values (_keep_pre_weight); replay skips the step, so there w' stays
            # the live tensor and the pulls land there, as in the warm-up (replay reads no weights).
            self._local[index] = live.detach().view(-1)
            self._pre_weight[index] = self._local[index]
        w = self._local[index]

        def glu_step() -> torch.Tensor:
            new_w = glu_local_update(w, grad.reshape(-1), self._pre_weight[index], lr=c.lr, loc_lr=self.loc_lr,
                                     momentum=c.momentum, weight_decay=c.weight_decay, k=self.k, alpha=self.alpha,
                                     beta=self.beta)
            if step.refresh_pre_weight:  # after grad_sync has used it (Algorithm 2 lines 3-5)
                self._pre_weight[index] = w
            self._keep_pre_weight(index, live)
            self._local[index] = new_w
            with torch.no_grad():
                live.view(-1).copy_(new_w)  # line 21: the devices compute the next iteration with w'
            return new_w

        new_w = c.update((index,), glu_step, w)  # replay: the GLU step costs what an SGD step does; weights stay
        c.mark_fresh(index)
        if step.pull:  # line 22: the global weights replace w' (not the devices' copy)
            self._pulls[index] = self.client.pull(iteration, index, into=new_w)

    def _keep_pre_weight(self, index: int, live: torch.Tensor) -> None:
        """pre_weight must keep its values while the live tensor takes w': a copy only where they share memory.

        That is once per tensor, at the first GLU step (w' began as the live tensor); later w' is the GLU step's
        own result, which the live tensor only copies from.
        """
        pre = self._pre_weight[index]
        if pre is not None and pre.untyped_storage().data_ptr() == live.untyped_storage().data_ptr():
            self._pre_weight[index] = pre.clone()

    def on_train_end(self):
        """The last pulls may still be on their way, and the pushes after them: both out before the end barrier."""
        for index, pull in enumerate(self._pulls):
            if pull is not None:
                try:
                    pull.result(timeout=self.final_pull_timeout_s)
                except TimeoutError:
                    raise TimeoutError(f"the last pull of {self.ctx.params[index].name} did not arrive within "
                                       f"{self.final_pull_timeout_s:g} s") from None
        # the pushes after the last pull are waited for by nobody but the shards: out before the end barrier
        self.client.wait_pushed(self.final_pull_timeout_s)
