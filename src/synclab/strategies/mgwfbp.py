"""``mgwfbp``: merged-gradient wait-free back-propagation (MG-WFBP §4–5, Algorithm 2); ``mgwfbp-opt``.

A run goes through four steps:

1. ``setup`` (every rank, before the start barrier): timed ring all-reduces of
   several sizes on the live cluster, in interleaved rounds after one untimed
   warm-up round; rank 0 fits T(M) = a + b·M (eq. 10, Fig. 4) by non-negative least
   squares to the per-size medians of its own timings, with M in bytes; a poor
   fit (R² < 0.9) is a warning, and only timings with no bandwidth signal at
   all (b = 0) stop the job.
2. Iterations 1..P (P = ``strategy.profile_iterations``) run as WFBP (§2.3):
   each gradient is copied into its own slot of the strategy's one gradient
   buffer and all-reduced alone as soon as it is ready (the copy step 4 makes
   too, so a worker holds one buffer of the model's size in both phases and
   never writes into the engine's gradients). Meanwhile rank 0
   times the forward pass t_f (to the loss, gate waits excluded) and each
   tensor's backward time t_b from the gradient-ready events
   (:func:`synclab.compute.profile.backward_times`, the rule model profiles
   use too), with the engine's stopwatch (§5.1; on CUDA it synchronizes the device before every
   timestamp of these iterations, as the paper does; on CPU autograd already
   runs one node at a time).
3. At the end of iteration P, on the communication thread (overlapping the
   next forward pass), rank 0 computes the merge plan m (eq. 22) from the
   medians over the P iterations — Algorithm 1 for ``mgwfbp``, the exact
   minimum of eq. 24 (``optimal_plan``) for ``mgwfbp-opt`` — and records it in
   ``plan.json``. It is broadcast from rank 0 (Algorithm 2 line 8) as a ring
   all-reduce of m encoded 0/1 to which only rank 0 contributes, so every rank
   decodes the same bytes.
4. From iteration P+1 (Algorithm 2 lines 23-32): each gradient is copied into
   its group's flat buffer (the groups are consecutive parts of that one
   buffer); a group is all-reduced as soon as all of its gradients are in,
   groups one after another in plan (backward) order; then each tensor of the
   group is averaged, updated and its gate opened.
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
import statistics
import time
from concurrent.futures import Future
from typing import Any, ClassVar, Literal

import torch
from pydantic import BaseModel, ConfigDict, Field, field_validator

from synclab.collective.ring import ring_allreduce_
from synclab.compute.profile import backward_times
from synclab.core import ParamInfo
from synclab.plans.mgwfbp import (
    CostModel,
    MergePlan,
    NoBandwidthSignal,
    algorithm1,
    decode_merged,
    fit_cost_model,
    fit_sizes,
    group_layout,
    iteration_time,
    non_overlapped_comm,
    optimal_plan,
    synceasgd_plan,
    wfbp_plan,
)
from synclab.plans.schema import Plan
from synclab.strategies.base import Strategy, WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import RingAllReduce

# strategy.name's plan: Algorithm 1 as printed, or the exact minimum of eq. 24
PLAN_OF_ALGORITHM = {"paper": "mgwfbp", "optimal": "mgwfbp-opt"}


def compared_plans(tensors: int, plan: MergePlan) -> dict[str, MergePlan]:
    """The merge plans MG-WFBP sets against each other (Fig. 8/9), by the strategy that sends them:
    layer-wise (WFBP, §2.3), one group (SyncEASGD, §2.4) and ``plan`` (MG-WFBP's own)."""
    return {"wfbp": wfbp_plan(tensors), "synceasgd": synceasgd_plan(tensors), "mgwfbp": plan}


# below this R² the fit is logged as poor (a warning, never an error: the plan is still derived)
POOR_FIT_R2 = 0.9

log = logging.getLogger(__name__)


class MgWfbpPlan(Plan):
    """The published placeholder; rank 0 measures, merges and records the merge plan in plan.json (§5)."""

    strategy: str
    algorithm: Literal["paper", "optimal"]
    profile_iterations: int = Field(ge=1)
    status: str


class MgWfbpOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    profile_iterations: int = Field(
        5, ge=1, description="iterations run as WFBP while t_f and t_b are measured (§5.1); medians are used")
    fit_sizes_params: list[int] | None = Field(
        None, description="all-reduce sizes (params) timed at setup to fit T(M) = a + b·M; "
                          "default 6 sizes from 256 params to the whole model, at most 4 Mi params")
    fit_repeats: int = Field(5, ge=1, description="timed rounds over the fit sizes; per-size medians are fitted")

    @field_validator("fit_sizes_params")
    @classmethod
    def _sizes(cls, v):
        if v is not None and (len(set(v)) < 2 or min(v) < 1):
            raise ValueError(f"needs at least 2 distinct sizes, each >= 1, got {v}")
        return v


@register
class MgWfbp(Strategy):
    """``mgwfbp``: MG-WFBP with Algorithm 1's merge plan, from t_b, t_f, a and b measured on the live cluster."""

    name = "mgwfbp"
    Options = MgWfbpOptions
    Plan = MgWfbpPlan
    checkpointable = True
    plan_algorithm: ClassVar[str] = "paper"
    # Algorithm 2: WFBP while profiling, then Algorithm 1's groups, on a T(M) = a + b·M fitted at setup (eq. 10)
    sim_model = RingAllReduce(groups="merged", planner=algorithm1, fit_cost_model=True)
    short_run = ("strategy.profile_iterations=3",)
    calibration_note = ("MG-WFBP profiling (§5.1): strategy.profile_iterations of WFBP while rank 0 times t_f and "
                        "t_b, then one iteration waiting for their last all-reduces and one for the plan's "
                        "broadcast (Algorithm 2 line 8)")

    @classmethod
    def calibration_iterations(cls, options: MgWfbpOptions) -> int:
        """P + 2, with P = ``strategy.profile_iterations``: iterations 1..P run as WFBP while rank 0 profiles
        (§5.1). An iteration's time includes its forward pass's wait for the previous iteration's
        synchronization (the per-layer gates), so iteration P + 1 still pays P's per-tensor all-reduces, and
        P + 2 pays the plan's broadcast, queued on the communication thread ahead of P + 1's first group
        (Algorithm 2 line 8). Measured: ``synclab simulate`` of ResNet-50 on 64 workers at 10 Gbit/s, P = 5:
        iterations 2-6 take 19.9 s (WFBP), 7 takes 0.415 s and 8 0.347 s, SyncEASGD's steady iteration."""
        return options.profile_iterations + 2

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards, workers, seed, options):
        return cls.Plan(strategy=cls.name, algorithm=cls.plan_algorithm,
                        profile_iterations=options.profile_iterations,
                        status="profiling: rank 0 replaces this with the measured merge plan")

    @classmethod
    def max_payload_bytes(cls, plan, params, *, batch_size, options: MgWfbpOptions, element_bytes=4):
        """A merged bucket is at most the whole model; the cost-model fit may time larger buffers."""
        total = sum(p.numel for p in params)
        return max([total, *(options.fit_sizes_params or fit_sizes(total))]) * element_bytes

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        self.options: MgWfbpOptions = ctx.options
        self._next = (ctx.rank + 1) % ctx.world
        self._prev_name = ctx.worker_names.get((ctx.rank - 1) % ctx.world, "")
        self._momentum: dict[int, torch.Tensor | None] = {}
        self._numels = [p.numel for p in ctx.params]
        self._dtype, self._device = ctx.tensors[0].dtype, ctx.tensors[0].device
        self._size_bytes = [t.numel() * t.element_size() for t in ctx.tensors]
        self._profiles: list[Future] = [Future() for _ in range(self.options.profile_iterations)]
        self._fit: dict[str, Any] = {}
        self.cost: CostModel | None = None
        self.plan: MergePlan | None = None
        self._layout: list[tuple[tuple[int, int, int], ...]] | None = None
        self._flat: torch.Tensor | None = None  # every gradient's slot: WFBP's while profiling, then the groups'
        self._offsets = list(itertools.accumulate(self._numels, initial=0))  # WFBP's slots (and the end)

    def peers(self):
        return {self._next} if self.ctx.world > 1 else set()

    def state_dict(self):
        """Momentum, the merge plan in use (None while profiling) and rank 0's profiled iterations so far."""
        return {"momentum": dict(self._momentum),
                "merged": None if self.plan is None else list(self.plan.merged_flags()),
                "profiles": [f.result() for f in self._profiles if f.done() and f.exception() is None]}

    def load_state_dict(self, state):
        """A restart keeps the plan it ran with (re-planning from new timings would change the groups)."""
        self._momentum = dict(state["momentum"])
        for future, sample in zip(self._profiles, state["profiles"]):
            future.set_result(sample)
        if state["merged"] is not None:
            self._use(MergePlan.from_merged_flags(state["merged"]))

    def _allreduce_mean_(self, flat: torch.Tensor, key: str, iteration: int) -> torch.Tensor:
        c = self.ctx
        ring_allreduce_(flat, rank=c.rank, world=c.world, key=key, iteration=iteration,
                        to_next=c.peer_links.get(self._next), inbox=c.inbox, prev_name=self._prev_name)
        return flat.div_(c.world)

    # -- 1. the cost model T(M) = a + b·M, on the live cluster ------------------------------------

    def setup(self):
        c = self.ctx
        if c.world == 1:  # nothing to communicate: a = b = 0 makes every plan WFBP
            self.cost = CostModel(0.0, 0.0)
            return
        sizes = self.options.fit_sizes_params or fit_sizes(sum(self._numels))
        buf = torch.zeros(max(sizes), dtype=self._dtype, device=self._device)
        seconds: dict[int, list[float]] = {s: [] for s in sizes}
        for rnd in range(-1, self.options.fit_repeats):  # round -1 warms the streams up, untimed
            for s in sizes:
                t0 = time.perf_counter()
                ring_allreduce_(buf[:s], rank=c.rank, world=c.world, key=f"mgwfbp/fit{rnd}/{s}", iteration=0,
                                to_next=c.peer_links.get(self._next), inbox=c.inbox, prev_name=self._prev_name)
                if rnd >= 0:
                    seconds[s].append(time.perf_counter() - t0)
        self._fit = {"repeats": self.options.fit_repeats}
        if c.rank == 0:
            timings = [(n * buf.element_size(), t) for n in sizes for t in seconds[n]]
            try:
                fit = fit_cost_model([m for m, _ in timings], [t for _, t in timings])
            except NoBandwidthSignal as e:
                raise RuntimeError(f"{self.name}: {e}. Time larger all-reduces (strategy.fit_sizes_params up to "
                                   f"the model's size) or more rounds (strategy.fit_repeats) on a link whose "
                                   f"bandwidth the sizes can show") from None
            self.cost = fit.model
            self._fit.update(fit.as_record())
            log.info("%s: T(M) = a + b*M fitted on %d sizes x %d repeats: a=%.3g s, b=%.3g s/byte, R2=%.3f%s",
                     self.name, len(sizes), self.options.fit_repeats, fit.model.a, fit.model.b, fit.r2,
                     "" if fit.bound == "none" else f" (bound {fit.bound})")
            if fit.r2 < POOR_FIT_R2:
                log.warning("%s: T(M) = a + b*M fits the all-reduce timings poorly (R2=%.3f < %.1f): sizes %s "
                            "bytes, medians %s s, residuals %s s; consider wider strategy.fit_sizes_params or "
                            "more strategy.fit_repeats", self.name, fit.r2, POOR_FIT_R2, list(fit.sizes),
                            [f"{t:.3g}" for t in fit.median_times], [f"{r:.2g}" for r in fit.residuals])

    # -- 2. profiling iterations: WFBP while rank 0 measures t_f and t_b (§5.1) -------------------

    def run_iteration(self, engine, iteration, x, y, start):
        if self.ctx.rank != 0 or iteration > len(self._profiles):
            return super().run_iteration(engine, iteration, x, y, start)
        profile = self._profiles[iteration - 1]
        try:
            timing = engine.run_iteration(iteration, x, y, start=start, stopwatch=True)
            clock = timing.stopwatch
            missing = [self.ctx.params[i].name for i, t in enumerate(clock.ready) if math.isnan(t)]
            if missing:
                raise RuntimeError(f"{self.name}: no gradient for {', '.join(missing)} in iteration {iteration}")
            self.record_profile(iteration, clock.forward_s, backward_times(clock.backward_start, clock.ready))
            return timing
        except BaseException as e:
            if not profile.done():
                profile.set_exception(e)
            raise

    def record_profile(self, iteration: int, t_f: float, t_b: list[float]) -> None:
        """Rank 0's measurement of profiled iteration ``iteration``: forward time and per-tensor t_b, seconds."""
        self._profiles[iteration - 1].set_result((t_f, list(t_b)))

    def on_gradient(self, iteration, index, grad):
        if self._layout is None:  # profiling iterations: WFBP (§2.3)
            offset, numel = self._offsets[index], self._numels[index]
            flat = self._buffer()[offset:offset + numel]
            flat.copy_(grad.reshape(-1))
            self._communicate(iteration, ((index, 0, numel),), flat, self.ctx.params[index].name)
            return
        group, offset, numel = self._slot_of[index]
        self._bufs[group][offset:offset + numel].copy_(grad.reshape(-1))
        self._missing[group] -= 1
        while self._turn < len(self._layout) and self._missing[self._turn] == 0:
            g = self._turn
            self._communicate(iteration, self._layout[g], self._bufs[g], f"mgwfbp/group{g}")
            self._missing[g] = len(self._layout[g])
            self._turn += 1
        if self._turn == len(self._layout):
            self._turn = 0

    def _communicate(self, iteration: int, slots, flat: torch.Tensor, key: str) -> None:
        c = self.ctx
        for tensor, _, _ in slots:
            c.record_event(iteration, tensor, "send_start")
        self._allreduce_mean_(flat, key, iteration)
        for tensor, _, _ in slots:
            c.record_event(iteration, tensor, "send_end")
        for tensor, offset, numel in slots:
            self._momentum[tensor] = c.sgd_(tensor, flat[offset:offset + numel], self._momentum.get(tensor))
            c.mark_fresh(tensor)

    def _buffer(self) -> torch.Tensor:
        """The one gradient buffer (the model's size), allocated at first use."""
        if self._flat is None:
            self._flat = torch.empty(sum(self._numels), dtype=self._dtype, device=self._device)
        return self._flat

    # -- 3. the plan: computed on rank 0, broadcast, buffers allocated once ------------------------

    def on_backward_end(self, iteration):
        if iteration != len(self._profiles):
            return
        c = self.ctx
        code = torch.zeros(len(c.params), dtype=torch.float32)
        if c.rank == 0:
            plan = self._plan_from_profiles()
            code += torch.tensor([float(m) for m in plan.merged_flags()])
        ring_allreduce_(code, rank=c.rank, world=c.world, key="mgwfbp/plan", iteration=iteration,
                        to_next=c.peer_links.get(self._next), inbox=c.inbox, prev_name=self._prev_name)
        self._use(decode_merged(code.tolist()))

    def _plan_from_profiles(self) -> MergePlan:
        samples = [f.result() for f in self._profiles]
        t_f = statistics.median(s[0] for s in samples)
        t_b = [statistics.median(s[1][i] for s in samples) for i in range(len(self._numels))]
        sizes = self._size_bytes
        plans = {"wfbp": wfbp_plan(len(sizes)), "synceasgd": synceasgd_plan(len(sizes)),
                 "mgwfbp": algorithm1(t_f, t_b, sizes, self.cost),
                 "mgwfbp-opt": optimal_plan(t_f, t_b, sizes, self.cost)}
        plan = plans[PLAN_OF_ALGORITHM[self.plan_algorithm]]
        self._write_record(plan, t_f, t_b, plans)
        return plan

    def _write_record(self, plan: MergePlan, t_f: float, t_b: list[float], plans: dict[str, MergePlan]) -> None:
        c = self.ctx
        if c.run_dir is None:
            return
        sizes = self._size_bytes
        record = {
            **c.plan.model_dump(),
            "status": "planned",
            "workers": c.world,
            "device_sync": "cuda.synchronize per tensor" if self._device.type == "cuda" else "none (cpu)",
            "units": "seconds; sizes in bytes; T(M) = a + b*M with b in seconds per byte",
            "a": self.cost.a, "b": self.cost.b,
            "cost_fit": self._fit,
            "t_f": t_f,
            "tensors": [{"index": p.index, "name": p.name, "params": p.numel, "size_bytes": sizes[p.index],
                         "t_b": t_b[p.index]} for p in c.params],
            "merged": list(plan.merged_flags()),
            "groups": [list(g) for g in plan.groups],
            "predicted_iteration_seconds": {k: iteration_time(p, t_f, t_b, sizes, self.cost)
                                            for k, p in plans.items()},
            "predicted_non_overlapped_comm_seconds": {k: non_overlapped_comm(p, t_f, t_b, sizes, self.cost)
                                                      for k, p in plans.items()},
            "plans": {k: [list(g) for g in p.groups] for k, p in plans.items()},
        }
        path = c.run_dir / "plan.json"  # the coordinator wrote the published placeholder; replace it whole
        tmp = path.with_name(".plan.json.tmp")
        tmp.write_text(json.dumps(record, indent=1) + "\n")
        os.replace(tmp, path)

    def _use(self, plan: MergePlan) -> None:
        self.plan = plan
        self._layout = group_layout(plan, self._numels)
        flat, start, self._bufs = self._buffer(), 0, []
        for slots in self._layout:
            size = sum(n for _, _, n in slots)
            self._bufs.append(flat[start:start + size])
            start += size
        self._slot_of = {tensor: (g, offset, numel)
                         for g, slots in enumerate(self._layout) for tensor, offset, numel in slots}
        self._missing = [len(slots) for slots in self._layout]
        self._turn = 0


@register
class MgWfbpOpt(MgWfbp):
    """``mgwfbp-opt``: MG-WFBP with the exact minimum of eq. 24 (``optimal_plan``) instead of Algorithm 1."""

    name = "mgwfbp-opt"
    plan_algorithm = "optimal"
    sim_model = RingAllReduce(groups="merged", planner=optimal_plan, fit_cost_model=True)
