"""Typed plans: what rank 0 publishes through the coordinator and every worker and PS shard reads.

Each strategy names its plan model (``Strategy.Plan``), defined in its own module; the ones
shared with lower layers (the PS shard reads a :class:`ServerPlan`) live here. A plan is validated when
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


def read_plan(model: type[Plan], plan_json: str, strategy: str) -> Plan:
    """Validate a published plan; :class:`PlanError` names the strategy and every offending key."""
    try:
        return model.model_validate_json(plan_json)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or '(plan)'}: {err['msg']}" for err in e.errors())
        raise PlanError(f"the published plan of strategy {strategy!r} does not match {model.__name__}: "
                        f"{problems}") from None
