"""Typed plans: what rank 0 publishes through the coordinator and every worker and PS shard reads.

Each strategy names its plan model (``Strategy.Plan``). A plan is validated when
it is built (rank 0's ``make_plan``) and again when a node reads it from the
coordinator (:func:`read_plan`): an unknown, misspelt or missing key is an error
that names the key, never a silent default. The wire carries the plan as JSON.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from synclab.plans.sharding import Partition

ServerModeName = Literal["notify-pull", "broadcast", "pull", "async"]


class PlanError(ValueError):
    """A published plan does not match the strategy's plan model."""


class Plan(BaseModel):
    """A strategy with nothing to plan publishes this empty plan."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ServerPlan(Plan):
    """What a PS shard needs (P3 §4.1-4.2): the (key, slice) placement, how it answers, in which order."""

    partitions: tuple[Partition, ...] = Field(min_length=1)
    server_mode: ServerModeName  # see synclab.ps.shard.SERVER_MODES
    serve_order: Literal["arrival", "priority"]
    max_ahead: int = Field(ge=1, description="iterations a worker's pushes may run ahead of the shard's updates")


class P3Plan(ServerPlan):
    slice_params: int = Field(ge=1)


class SsdPlan(ServerPlan):
    warmup: int = Field(ge=0)
    k: int = Field(ge=1)


class MgWfbpPlan(Plan):
    """The published placeholder; rank 0 measures, merges and records the merge plan in plan.json (§5)."""

    strategy: str
    algorithm: Literal["paper", "optimal"]
    profile_iterations: int = Field(ge=1)
    status: str


class StanzaPlan(Plan):
    """Stanza's node assignment (§4.1.3, eq. 2-5) and the CONV/FC boundary."""

    boundary: int = Field(ge=1)
    conv_workers: int = Field(ge=1)
    fc_workers: int = Field(ge=1)
    assigned_by: Literal["strategy.fc_workers", "eq. 2-5"]
    profile: str | None = None
    bandwidth_bps: float | None = None
    predicted_iteration_seconds: float | None = None
    predicted_throughput_samples_per_s: float | None = None


def read_plan(model: type[Plan], plan_json: str, strategy: str) -> Plan:
    """Validate a published plan; :class:`PlanError` names the strategy and every offending key."""
    try:
        return model.model_validate_json(plan_json)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(plan)'}: {err['msg']}" for err in e.errors())
        raise PlanError(f"the published plan of strategy {strategy!r} does not match {model.__name__}: "
                        f"{problems}") from None
