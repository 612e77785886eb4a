"""The P3 plan (§4.2): slices of at most slice_params, round robin over shards, priority from the forward order."""

import pytest
from pydantic import ValidationError

from synclab.config import SpecError, parse_spec
from synclab.core import ParamInfo
from synclab.strategies import registry
from synclab.strategies.p3 import P3, P3Options, P3Slicing

# two layers of (weight, bias), then a last layer; layer indices as the engine numbers them
PARAMS = [
    ParamInfo(0, "conv.weight", (10, 12), 120, 0),
    ParamInfo(1, "conv.bias", (10,), 10, 0),
    ParamInfo(2, "fc.weight", (25, 10), 250, 1),
    ParamInfo(3, "fc.bias", (25,), 25, 1),
    ParamInfo(4, "out.weight", (45,), 45, 2),
]


def plan(cls, slice_params=50, shards=3):
    return cls.make_plan(PARAMS, ps_shards=shards, workers=2, seed=0,
                         options=P3Options(slice_params=slice_params)).model_dump(mode="json")


def test_slices_cover_every_tensor_in_pieces_of_at_most_slice_params():
    parts = plan(P3)["partitions"]
    for info in PARAMS:
        mine = [p for p in parts if p["key"] == info.name]
        assert [p["slice"] for p in mine] == list(range(len(mine)))
        assert all(p["length"] <= 50 for p in mine)
        assert [p["offset"] for p in mine] == [sum(q["length"] for q in mine[:i]) for i in range(len(mine))]
        assert sum(p["length"] for p in mine) == info.numel
    by_hand = {"conv.weight": [50, 50, 20], "conv.bias": [10], "fc.weight": [50] * 5, "fc.bias": [25],
               "out.weight": [45]}
    assert {k: [p["length"] for p in parts if p["key"] == k] for k in by_hand} == by_hand


def test_round_robin_over_shards_in_model_order():
    parts = plan(P3, shards=3)["partitions"]
    assert [p["shard"] for p in parts] == [i % 3 for i in range(len(parts))]


def test_priority_is_the_layer_forward_position_weight_and_bias_alike():
    parts = plan(P3)["partitions"]
    prio = {p["key"]: set() for p in parts}
    for p in parts:
        prio[p["key"]].add(p["priority"])
    assert prio == {"conv.weight": {0}, "conv.bias": {0}, "fc.weight": {1}, "fc.bias": {1}, "out.weight": {2}}


def test_p3_broadcasts_and_serves_by_priority_slicing_alone_does_neither_priority():
    p3, sliced = plan(P3), plan(P3Slicing)
    assert p3["server_mode"] == sliced["server_mode"] == "broadcast"
    assert (p3["serve_order"], sliced["serve_order"]) == ("priority", "arrival")
    assert (P3.send_policy, P3Slicing.send_policy) == ("priority", "fifo")
    assert [{**p, "priority": 0} for p in p3["partitions"]] == sliced["partitions"]


def test_default_slice_is_50000_params_and_bad_options_are_refused_by_name():
    assert P3Options().slice_params == 50_000
    with pytest.raises(ValidationError):
        P3Options(slice_params=0)
    spec = parse_spec({"strategy": {"name": "p3", "slice_params": 1000}, "cluster": {"ps_shards": 2}})
    assert spec.strategy.options.slice_params == 1000
    with pytest.raises(SpecError, match="strategy"):
        parse_spec({"strategy": {"name": "p3-slicing", "slice_size": 1000}})
    assert {"p3", "p3-slicing"} <= set(registry.names()) and registry.get("p3").needs_ps
