"""Typed plans: every strategy's plan round-trips through JSON; a wrong key is refused by name on both ends."""

from __future__ import annotations

import json

import pytest

from synclab.core import ParamInfo
from synclab.plans.schema import PlanError, ServerPlan, read_plan
from synclab.strategies import registry

PARAMS = [ParamInfo(0, "features.0.weight", (8, 3, 3, 3), 216, 0), ParamInfo(1, "features.0.bias", (8,), 8, 0),
          ParamInfo(2, "classifier.0.weight", (10, 32), 320, 1), ParamInfo(3, "classifier.0.bias", (10,), 10, 1)]


def build(name: str):
    cls = registry.get(name)
    options = cls.Options(**({"fc_workers": 1} if name == "stanza" else {}))
    return cls, cls.make_plan(PARAMS, ps_shards=2, workers=2, seed=0, options=options)


@pytest.mark.parametrize("name", registry.names())
def test_every_strategy_plan_round_trips_through_json(name):
    cls, plan = build(name)
    assert isinstance(plan, cls.Plan)
    assert read_plan(cls.Plan, plan.model_dump_json(), name) == plan


@pytest.mark.parametrize("name", [n for n in registry.names() if registry.get(n).needs_ps])
def test_ps_strategies_publish_a_server_plan(name):
    _, plan = build(name)
    assert isinstance(plan, ServerPlan) and plan.max_ahead >= 1 and plan.partitions


def _published(name: str) -> dict:
    return json.loads(build(name)[1].model_dump_json())


def test_a_misspelt_key_is_refused_by_name():
    data = _published("ps")
    data["serve_ordr"] = data.pop("serve_order")
    with pytest.raises(PlanError, match=r"serve_ordr: Extra inputs are not permitted") as e:
        read_plan(registry.get("ps").Plan, json.dumps(data), "ps")
    assert "serve_order: Field required" in str(e.value) and "'ps'" in str(e.value)


def test_a_missing_key_is_refused_not_defaulted():
    data = _published("ssdsgd")
    del data["max_ahead"]
    with pytest.raises(PlanError, match="max_ahead: Field required"):
        read_plan(registry.get("ssdsgd").Plan, json.dumps(data), "ssdsgd")


def test_a_bad_value_and_a_bad_partition_are_named():
    data = _published("p3")
    data["server_mode"] = "notify-pul"
    data["partitions"][0]["lenght"] = 3
    with pytest.raises(PlanError) as e:
        read_plan(registry.get("p3").Plan, json.dumps(data), "p3")
    assert "server_mode" in str(e.value) and "partitions.0.lenght" in str(e.value)


def test_another_strategys_plan_is_refused():
    with pytest.raises(PlanError, match="StanzaPlan"):
        read_plan(registry.get("stanza").Plan, build("ps")[1].model_dump_json(), "stanza")


def test_the_publisher_validates_too():
    with pytest.raises(ValueError, match="serve_order"):
        registry.get("ps").Plan(partitions=build("ps")[1].partitions, server_mode="notify-pull", max_ahead=1)
