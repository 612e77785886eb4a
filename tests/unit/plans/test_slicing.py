"""P3 parameter slicing: slice bounds, round-robin shards, forward-order priority."""

from __future__ import annotations

import random

import numpy as np
import pytest

from synclab.plans.slicing import DEFAULT_SLICE_PARAMS, Slice, shard_loads, slice_tensors


def test_small_example_by_hand():
    slices = slice_tensors([5, 2, 7], slice_params=3, shards=2)
    assert slices == [
        Slice(key=0, slice_index=0, offset=0, length=3, shard=0, priority=0),
        Slice(key=0, slice_index=1, offset=3, length=2, shard=1, priority=0),
        Slice(key=1, slice_index=0, offset=0, length=2, shard=0, priority=1),
        Slice(key=2, slice_index=0, offset=0, length=3, shard=1, priority=2),
        Slice(key=2, slice_index=1, offset=3, length=3, shard=0, priority=2),
        Slice(key=2, slice_index=2, offset=6, length=1, shard=1, priority=2),
    ]


def test_default_slice_is_50000_params():
    assert DEFAULT_SLICE_PARAMS == 50_000
    slices = slice_tensors([102_760_448], shards=4)  # VGG-19's fc6 weight
    assert len(slices) == 2056  # ceil(102,760,448 / 50,000)
    assert {s.length for s in slices[:-1]} == {50_000}
    assert slices[-1].length == 102_760_448 - 2055 * 50_000


def test_round_robin_runs_across_the_whole_model():
    # one-slice tensors still rotate shards; the counter does not restart per tensor
    assert [s.shard for s in slice_tensors([10, 10, 10, 10, 10], 10, shards=3)] == [0, 1, 2, 0, 1]


def test_slices_tile_every_tensor_exactly():
    rng = random.Random(0)
    for _ in range(200):
        sizes = [rng.randint(1, 400) for _ in range(rng.randint(0, 12))]
        slice_params, shards = rng.randint(1, 60), rng.randint(1, 7)
        slices = slice_tensors(sizes, slice_params, shards=shards)
        assert [s.shard for s in slices] == [g % shards for g in range(len(slices))]
        for key, size in enumerate(sizes):
            mine = [s for s in slices if s.key == key]
            assert [s.slice_index for s in mine] == list(range(len(mine)))
            assert len(mine) == -(-size // slice_params)
            assert all(1 <= s.length <= slice_params for s in mine)
            assert all(s.priority == key for s in mine)
            offset = 0
            for piece in mine:
                assert piece.offset == offset
                offset += piece.length
            assert offset == size
        loads = shard_loads(slices, shards)
        assert sum(loads) == sum(sizes)


def test_shards_balance_within_one_slice():
    slices = slice_tensors([1_000_000, 37, 250_000, 9_999], shards=4)
    loads = shard_loads(slices, 4)
    assert max(loads) - min(loads) <= 50_000


def test_priority_orders_layers_as_forward_pass_consumes_them():
    slices = slice_tensors([3, 3, 3], 2, shards=1)
    # a priority queue pops the smallest number first: layer 0 (input side) first
    assert [s.key for s in sorted(slices, key=lambda s: s.priority)][:2] == [0, 0]
    assert min(slices, key=lambda s: s.priority).key == 0


def test_numpy_integers_are_accepted():
    slices = slice_tensors(list(np.array([4, 4])), np.int64(3), shards=np.int32(2))
    assert [s.length for s in slices] == [3, 1, 3, 1]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"sizes": [1], "slice_params": 0, "shards": 1}, "slice_params"),
        ({"sizes": [1], "slice_params": -5, "shards": 1}, "slice_params"),
        ({"sizes": [1], "slice_params": 2.5, "shards": 1}, "slice_params"),
        ({"sizes": [1], "shards": 0}, "shards"),
        ({"sizes": [1], "shards": True}, "shards"),
        ({"sizes": [3, 0], "shards": 1}, r"sizes\[1\]"),
    ],
)
def test_bad_input_is_refused_by_name(kwargs, field):
    with pytest.raises(ValueError, match=field):
        slice_tensors(**kwargs)


def test_empty_model_has_no_slices():
    assert slice_tensors([], shards=2) == []
