"""How the simulator (:mod:`synclab.sim`) models a strategy, declared by the strategy itself.

A strategy class names its model in ``sim_model``: one of the stock models below with the
parameters that make it this strategy (a ring all-reduce merged by this strategy's planner, a
parameter server serving this strategy's plan...), or :class:`OwnModel`, a factory the simulator
calls with an API object (:class:`synclab.sim.api.ModelApi`) — the strategy never imports the
simulator, which sits a layer above it (DESIGN "The layers"). ``sim_model = None`` (the default):
the emulator runs the strategy and ``synclab simulate`` refuses it, saying how to add a model.

The descriptors are data: the simulator maps each kind to its implementation
(:mod:`synclab.sim.strategies`); nothing there compares strategy names.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

# The worker runtime's host time per tensor beside the ring (measured: synclab.sim.run.DEFAULT_TENSOR_S)
# follows one of two code paths: one all-reduce per tensor, or gradients copied into a group's buffer.
HostPath = Literal["per-tensor", "grouped"]
# How a PS strategy's workers push and get values back (ParameterServer.client).
ClientKind = Literal["push", "push-pull", "scheduled-pull", "push-then-pull"]
CLIENT_KINDS: tuple[str, ...] = ClientKind.__args__


@dataclass(frozen=True)
class SimModel:
    """Base of every simulator model declaration."""

    # Every rank does the same thing at the same time (a ring all-reduce strategy): the simulator runs
    # rank 0 and the others mirror it (bytes and rows copied), which is exact and N times cheaper.
    mirrors_ranks: ClassVar[bool] = False

    @property
    def host_path(self) -> HostPath | None:
        """Which measured per-tensor host cost applies when the emulator's host is modelled; None: none."""
        return None


@dataclass(frozen=True)
class RingAllReduce(SimModel):
    """Gradients all-reduced by ring (MG-WFBP Table 2 "Ring", T(M) = a + b·M) on the communication thread,
    then every worker updates each tensor itself and opens its gate.

    ``groups``: ``"none"`` (no communication: one process with the global batch), ``"per-tensor"`` (each
    gradient all-reduced when backward produces it: WFBP), ``"whole-model"`` (one all-reduce once the last
    gradient is in: SyncEASGD) or ``"merged"`` (per-tensor for ``options.profile_iterations`` iterations,
    then the groups of ``planner(t_f, t_b, sizes, cost)``, MG-WFBP Algorithm 2) or ``"buckets"`` (fixed groups
    from the tensor sizes, ``buckets(numels, options)`` -> a MergePlan: DDP's buckets, each all-reduced once
    its last gradient is in, in order). ``fit_cost_model``: time
    ring all-reduces before training and fit T(M) = a + b·M (MG-WFBP eq. 10), as ``planner`` needs.
    """

    mirrors_ranks: ClassVar[bool] = True
    groups: Literal["none", "per-tensor", "whole-model", "merged", "buckets"] = "per-tensor"
    planner: Callable[..., Any] | None = None
    fit_cost_model: bool = False
    buckets: Callable[..., Any] | None = None

    def __post_init__(self):
        if (self.groups == "merged") != (self.planner is not None):
            raise ValueError("RingAllReduce: a planner goes with groups='merged', and only there")
        if (self.groups == "buckets") != (self.buckets is not None):
            raise ValueError("RingAllReduce: buckets(numels, options) goes with groups='buckets', and only there")

    @property
    def host_path(self) -> HostPath:
        return "per-tensor" if self.groups == "per-tensor" else "grouped"


@dataclass(frozen=True)
class ParameterServer(SimModel):
    """Workers push gradients to the PS shards of the strategy's plan (a :class:`~synclab.plans.schema.ServerPlan`
    from ``make_plan``: placement, slices, priorities, ``server_mode``, ``serve_order``); the shards aggregate,
    update and notify or broadcast as the plan says (P3 §4.1-4.2).

    ``client``: ``"push"`` (push each gradient; the values come back by notify + pull or broadcast),
    ``"push-pull"`` (push, then pull the same tensor on the same stream: the reply includes the push) or
    ``"scheduled-pull"`` (push every iteration; ``schedule(options)`` decides per iteration between a
    warm-up pull and a local update with a pull every k-th iteration: an object with ``is_warmup(i)`` and
    ``step(i).pull``, iterations counted from 0, as :class:`synclab.plans.ssdsgd.SsdSchedule`) or
    ``"push-then-pull"`` (after backward push every gradient, once they have all arrived pull every tensor,
    the gates opening when all have landed: Stanza's PS, §5.2 and eq. 6; shards in ``pull`` mode).
    ``choose_client(options)``: where the strategy's options pick the client per run, the kind for these
    options (it replaces ``client``; not with ``scheduled-pull``).
    """

    client: ClientKind = "push"
    schedule: Callable[[Any], Any] | None = None
    choose_client: Callable[[Any], ClientKind] | None = None

    def __post_init__(self):
        if (self.client == "scheduled-pull") != (self.schedule is not None):
            raise ValueError("ParameterServer: a schedule goes with client='scheduled-pull', and only there")

    def client_for(self, options: Any) -> ClientKind:
        """The client kind of a run with these strategy options."""
        kind = self.client if self.choose_client is None else self.choose_client(options)
        if kind not in CLIENT_KINDS or (kind == "scheduled-pull") != (self.schedule is not None):
            raise ValueError(f"ParameterServer: client {kind!r} for options {options!r} does not fit this model")
        return kind


@dataclass(frozen=True)
class SplitRoles(SimModel):
    """Workers split into a CONV group and an FC group (Stanza §4.1): CONV workers send boundary activations
    and labels to their FC worker, get activation gradients back, and each group all-reduces its own
    gradients by recursive doubling. The plan gives ``conv_workers``, ``fc_workers`` and ``boundary``;
    ``groups(n_c, n_f)`` maps each FC worker to the CONV workers it serves."""

    groups: Callable[[int, int], Any]

    def __post_init__(self):
        if not callable(self.groups):
            raise ValueError("SplitRoles needs groups(n_c, n_f)")


@dataclass(frozen=True)
class OwnModel(SimModel):
    """A strategy's own model: ``factory(api)`` returns an object with ``on_gradient(iteration, index)`` and
    ``on_backward_end(iteration)``, which the simulated worker calls as the engine calls the strategy. ``api``
    (:class:`synclab.sim.api.ModelApi`) is what the model may use: the communication thread, ring
    all-reduce, the optimizer step, gates, timers. ``mirror``: every rank does the same (see
    :attr:`SimModel.mirrors_ranks`); a model that all-reduces needs it."""

    factory: Callable[[Any], Any]
    mirror: bool = True
    per_tensor_host: HostPath | None = None

    def __post_init__(self):
        if not callable(self.factory):
            raise ValueError("OwnModel needs factory(api)")

    @property
    def mirrors_ranks(self) -> bool:  # type: ignore[override]
        return self.mirror

    @property
    def host_path(self) -> HostPath | None:
        return self.per_tensor_host
