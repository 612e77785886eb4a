"""The one interface every synchronization strategy implements.

A strategy lives on the worker's communication thread. The compute engine hands
it each gradient as soon as backward produces it (in backward order) and tells
it when backward is over; the strategy moves bytes through the links and the
inbox in :class:`WorkerContext` and calls ``ctx.mark_fresh(i)`` once parameter
``i`` holds its values for the next iteration — that opens the per-layer gate
the next forward pass waits on. Strategies never import gRPC.

The plan (placement, merge plan, slice map...) is computed once by rank 0 from
the parameter list (:meth:`Strategy.make_plan`), published through the
coordinator, and handed to every worker and PS shard.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Sequence
from typing import Callable, ClassVar

import torch
from pydantic import BaseModel, ConfigDict

from synclab.compute.engine import EngineBase
from synclab.core import IterationTiming, ParamInfo
from synclab.plans.schema import Plan
from synclab.ps.optimizer import sgd_momentum_
from synclab.transport.spans import SpanLog
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
    # Replay compute with a profile that has update_seconds: let tensors' update time pass (no arithmetic).
    replay_update: Callable[[Sequence[int]], None] | None = None
    spans: SpanLog | None = None             # the node's wire and compute spans (update steps are added here)

    def sgd_(self, index: int, grad: torch.Tensor, buf: torch.Tensor | None) -> torch.Tensor | None:
        """The worker-side SGD step on tensor ``index`` (flat ``grad``); returns the momentum buffer.

        In replay compute whose profile measured the update, the tensor's share of
        the profiled step passes instead and the weights stay as they are (replay
        does no model math). With ``spans``, the step is recorded as an ``update`` span
        (compute that can hide communication, see :mod:`synclab.report.overlap`).
        """
        t0 = self.spans.now() if self.spans is not None else 0.0
        if self.replay_update is not None:
            self.replay_update((index,))
        else:
            buf = sgd_momentum_(self.tensors[index].data.view(-1), grad, buf, lr=self.lr, momentum=self.momentum,
                                weight_decay=self.weight_decay)
        if self.spans is not None:
            self.spans.add("update", 0, t0, self.spans.now())
        return buf


class Strategy(ABC):
    """Base class; subclasses set ``name`` and register with :func:`registry.register`."""

    name: ClassVar[str]
    Options: ClassVar[type[BaseModel]] = NoOptions
    Plan: ClassVar[type[Plan]] = Plan         # the model of what make_plan publishes (synclab.plans.schema)
    needs_ps: ClassVar[bool] = False          # launch PS shards
    single_process: ClassVar[bool] = False    # one worker with the global batch
    send_policy: ClassVar[str] = "fifo"       # transport scheduler policy on workers
    server_mode: ClassVar[str] = "notify-pull"  # PS behaviour, when needs_ps

    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx

    @classmethod
    def make_plan(cls, params: list[ParamInfo], *, ps_shards: int, workers: int, seed: int,
                  options: BaseModel) -> Plan:
        """The plan rank 0 publishes, an instance of ``cls.Plan``; default empty."""
        return cls.Plan()

    def peers(self) -> set[int]:
        """Worker ranks this worker opens streams to (it receives from whoever opens one to it)."""
        return set()

    def setup(self) -> None:
        """Agree on initial parameters before the first iteration (runs once, before the start barrier)."""

    def data_shard(self) -> tuple[int, int] | None:
        """(data_rank, data_world) this worker reads its batch as; None for a worker that reads no data."""
        return self.ctx.rank, self.ctx.world

    def run_iteration(self, engine: EngineBase, iteration: int, x, y, start: float) -> IterationTiming:
        """One iteration of compute. Strategies that split the model (Stanza) override this."""
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
