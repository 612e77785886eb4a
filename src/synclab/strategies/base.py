"""The one interface every synchronization strategy implements.

A strategy lives on the worker's communication thread. The compute engine hands
it each gradient as soon as backward produces it (in backward order) and tells
it when backward is over; the strategy moves bytes through the links and the
inbox in :class:`WorkerContext` and calls ``ctx.mark_fresh(i)`` once parameter
``i`` holds its values for the next iteration — that opens the per-layer gate
the next forward pass waits on. Strategies never import gRPC.

A strategy that changes compute (Stanza's split passes, MG-WFBP's profiling
iterations) overrides :meth:`Strategy.run_iteration` and calls only the public
compute API documented in :mod:`synclab.compute.engine`, which real and replay
compute both implement; its optimizer steps go through ``ctx.update``/``ctx.sgd_``.

The plan (placement, merge plan, slice map...) is computed once by rank 0 from
the parameter list (:meth:`Strategy.make_plan`), published through the
coordinator, and handed to every worker and PS shard.

What the simulator does with the strategy is declared on the class too (``sim_model``, a
:mod:`synclab.strategies.simmodel` object), as are the properties other layers ask about
(``lockstep``, ``needs_ps``, ``closed_form``...): nothing outside this package tests a strategy's name.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch
from pydantic import BaseModel, ConfigDict

from synclab.compute.engine import EngineBase
from synclab.core import IterationTiming, ParamInfo
from synclab.plans.schema import Plan
from synclab.ps.optimizer import sgd_momentum_
from synclab.strategies.simmodel import SimModel
from synclab.transport.inbox import Inbox
from synclab.transport.link import Link


class NoOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")


@dataclass(slots=True)
class WorkerContext:
    """What a strategy may touch: identity, parameters, links, inbox, hyper-parameters."""

    rank: int
    world: int
    node: str
    params: list[ParamInfo]
    tensors: list[torch.Tensor]           # live parameter tensors (same order as params)
    lr: float
    momentum: float
    weight_decay: float
    seed: int
    mark_fresh: Callable[[int], None]
    inbox: Inbox
    ps_links: dict[int, Link] = field(default_factory=dict)     # shard index -> link
    peer_links: dict[int, Link] = field(default_factory=dict)   # worker rank -> link
    ps_names: dict[int, str] = field(default_factory=dict)
    worker_names: dict[int, str] = field(default_factory=dict)
    plan: Plan = field(default_factory=Plan)  # the strategy's own plan model (Strategy.Plan), validated
    options: BaseModel = field(default_factory=NoOptions)
    run_dir: Path | None = None              # rank 0 may write strategy records here (e.g. plan.json)
    batch_size: int = 0                      # per-worker batch (model.batch_size)
    record_event: Callable[[int, int, str], None] = lambda iteration, index, event: None
    # The engine's optimizer step (EngineBase.update): update(indices, step, unchanged) runs step() and returns
    # its result, or lets the profiled time pass and returns ``unchanged`` (replay); recorded as an update span.
    update: Callable[[Sequence[int], Callable[[], Any], Any], Any] = lambda indices, step, unchanged: step()

    def sgd_(self, index: int, grad: torch.Tensor, buf: torch.Tensor | None) -> torch.Tensor | None:
        """The worker-side SGD step on tensor ``index`` (flat ``grad``), through ``update``; returns the momentum buffer."""
        return self.update((index,), lambda: sgd_momentum_(self.tensors[index].data.view(-1), grad, buf, lr=self.lr,
                                                           momentum=self.momentum, weight_decay=self.weight_decay),
                           buf)


class Strategy(ABC):
    """Base class; subclasses set ``name`` and register with :func:`registry.register`."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions
    Plan: ClassVar[type[Plan]] = Plan         # the model of what make_plan publishes (synclab.plans.schema)
    needs_ps: ClassVar[bool] = False          # launch PS shards
    single_process: ClassVar[bool] = False    # one worker with the global batch
    send_policy: ClassVar[str] = "fifo"       # transport scheduler policy on workers
    server_mode: ClassVar[str] = "notify-pull"  # PS behaviour, when needs_ps
    # Every worker ends each iteration with the same parameters (a consistent cut exists after any iteration),
    # and state_dict() holds all the worker-side state beyond them: run.checkpoint_every may be set.
    checkpointable: ClassVar[bool] = False
    # After every iteration's sync, rank 0's parameters are the whole model the strategy trains (what
    # run.eval_every evaluates); False where workers own different parts until on_train_end.
    rank0_holds_model: ClassVar[bool] = True
    # Every worker waits for every other in each iteration (its iteration ends with the others'), so the
    # cluster moves at the slowest worker's pace; False where workers run on at their own pace between
    # synchronizations (asgd; ssdsgd's local iterations): synclab.report.summary.compute_summary(lockstep=).
    lockstep: ClassVar[bool] = True
    # How `synclab simulate` models this strategy (synclab.strategies.simmodel): a stock model with this
    # strategy's parameters, or OwnModel(factory). None: the emulator only; the simulator refuses it.
    sim_model: ClassVar[SimModel | None] = None
    # The closed-form iteration-time model of the Stanza paper that describes this strategy, for
    # synclab.reproduce's model columns: "eq3" (CONV/FC split, Stanza eq. 2-5) or "eq6" (the PS baseline,
    # eq. 6-7); None: no closed form.
    closed_form: ClassVar[str | None] = None
    # Spec overrides that fit the strategy into a short run of a few iterations (the validation grid's
    # 8 iterations, 2 of them warm-up), e.g. a shorter profiling phase.
    short_run: ClassVar[tuple[str, ...]] = ()
    # What a strategy that measures before it plans does in its calibration iterations (see
    # calibration_iterations), in a few words for the summary table; "" for strategies without any.
    calibration_note: ClassVar[str] = ""

    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx

    @classmethod
    def paper_label(cls, overrides: dict[str, str], lr: float) -> str | None:
        """How the papers name this configuration (``overrides``: the run's ``--set`` keys and values, ``lr``
        the base learning rate), for generated result pages; None: no such name (the page uses its own)."""
        return None

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards: int, workers: int, seed: int,
                  options: BaseModel) -> Plan:
        """The plan rank 0 publishes, an instance of ``cls.Plan``; default empty."""
        return cls.Plan()

    @classmethod
    def calibration_iterations(cls, options: BaseModel) -> int:
        """How many of the run's first iterations (1..n) this strategy spends measuring before it plans
        (MG-WFBP's profiling iterations, §5.1). They run, but not as the steady state does, so the records
        mark them ``calibration`` (iterations.csv ``phase``) and summary figures leave them out
        (:func:`synclab.report.summary.compute_summary`). Default 0: no calibration."""
        return 0

    @classmethod
    def calibration_record(cls, options: BaseModel, iterations: int) -> dict[str, Any] | None:
        """``summary.json``'s ``calibration``: the calibration iterations of a run of ``iterations``
        iterations, by number, and what they were for; None without any."""
        n = min(cls.calibration_iterations(options), iterations)
        return {"iterations": list(range(1, n + 1)), "what": cls.calibration_note or cls.name} if n > 0 else None

    @classmethod
    def max_payload_bytes(cls, plan: Plan, params: Sequence[ParamInfo], *, batch_size: int, options: BaseModel,
                          element_bytes: int = 4) -> int:
        """The largest payload any node of this strategy legitimately receives (the transport adds a margin).

        Default, for all-reduce strategies: the whole model in one buffer (a merged bucket may hold every
        tensor; ring segments are pieces of a buffer). PS nodes know only the plan, so strategies with PS
        shards override this from the plan's partitions.
        """
        return sum(p.numel for p in params) * element_bytes

    def peers(self) -> set[int]:
        """Worker ranks this worker opens streams to (it receives from whoever opens one to it)."""
        return set()

    def setup(self) -> None:
        """Agree on initial parameters before the first iteration (runs once, before the start barrier)."""

    def data_shard(self) -> tuple[int, int] | None:
        """(data_rank, data_world) this worker reads its batch as; None for a worker that reads no data."""
        return self.ctx.rank, self.ctx.world

    def run_iteration(self, engine: EngineBase, iteration: int, x, y, start: float) -> IterationTiming:
        """One iteration of compute, through the engine's public API (:mod:`synclab.compute.engine`).

        The default runs the whole model; a strategy that changes compute (Stanza's split passes, MG-WFBP's
        profiling iterations) overrides this and uses only that API.
        """
        return engine.run_iteration(iteration, x, y, start=start)

    @abstractmethod
    def on_gradient(self, iteration: int, index: int, grad: torch.Tensor) -> None:
        """Gradient of parameter ``index`` for ``iteration`` is ready (this worker's own, unscaled)."""

    def on_backward_end(self, iteration: int) -> None:
        """Every gradient of ``iteration`` has been handed over."""

    def on_train_end(self) -> None:
        """The last iteration is over and every gate is open; rank 0 saves its model right after.

        Runs on every worker. A strategy whose workers own different parts of the
        model (Stanza) gathers the whole model on rank 0 here.
        """

    def finish(self) -> None:
        """Training is over; release resources."""

    def state_dict(self) -> dict[str, Any]:
        """The worker-side state beyond the parameters (optimizer buffers) at a checkpoint; default none."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` on a restart, before :meth:`setup`."""
