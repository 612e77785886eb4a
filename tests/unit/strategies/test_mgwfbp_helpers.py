"""Pure helpers that run an MG-WFBP plan: t_b from gradient-ready times, buffer layout, plan broadcast, fit sizes."""

from __future__ import annotations

import itertools
import random

import pytest

from synclab.plans.mgwfbp import (
    MergePlan,
    backward_times,
    decode_merged,
    fit_sizes,
    group_layout,
    synceasgd_plan,
    wfbp_plan,
)


def test_backward_times_are_the_intervals_between_ready_events():
    # backward starts at 1.0; tensors 3, 2, 1, 0 ready at 1.5, 1.75, 3.0, 3.25 (§5.1)
    assert backward_times(1.0, [3.25, 3.0, 1.75, 1.5]) == [0.25, 1.25, 0.25, 0.5]


def test_backward_times_when_a_bias_comes_after_its_weight():
    # a conv layer: weight (index 0) ready at 2.0, its bias (index 1) at 2.25, layer above (2) at 1.0;
    # a plan sends 2, then 1, then 0, so 1 counts as ready at 2.25 and 0 adds nothing after it
    assert backward_times(0.0, [2.0, 2.25, 1.0]) == [0.0, 1.25, 1.0]


def test_backward_times_always_sum_to_the_whole_backward_pass():
    rng = random.Random(4)
    for _ in range(200):
        ready = [rng.uniform(0, 1) for _ in range(rng.randint(1, 12))]
        t_b = backward_times(-0.5, ready)
        assert min(t_b) >= 0
        assert sum(t_b) == pytest.approx(max(ready) + 0.5)


def test_backward_times_needs_tensors():
    with pytest.raises(ValueError):
        backward_times(0.0, [])


def test_group_layout_packs_each_group_in_send_order():
    plan = MergePlan(((4,), (3, 2, 1), (0,)))
    assert group_layout(plan, [10, 20, 30, 40, 50]) == [
        ((4, 0, 50),),
        ((3, 0, 40), (2, 40, 30), (1, 70, 20)),
        ((0, 0, 10),),
    ]


def test_group_layout_covers_every_element_once():
    sizes = [3, 1, 4, 1, 5, 9, 2, 6]
    for flags in itertools.product((False, True), repeat=len(sizes) - 1):
        plan = MergePlan.from_merged_flags((False, *flags))
        layout = group_layout(plan, sizes)
        assert sorted(t for slots in layout for t, _, _ in slots) == list(range(len(sizes)))
        for slots in layout:
            offsets = [o for _, o, _ in slots]
            assert offsets == [sum(n for _, _, n in slots[:k]) for k in range(len(slots))]
            assert all(n == sizes[t] for t, _, n in slots)


def test_group_layout_of_synceasgd_and_wfbp():
    assert group_layout(synceasgd_plan(3), [5, 6, 7]) == [((2, 0, 7), (1, 7, 6), (0, 13, 5))]
    assert group_layout(wfbp_plan(2), [5, 6]) == [((1, 0, 6),), ((0, 0, 5),)]


def test_group_layout_refuses_wrong_length():
    with pytest.raises(ValueError):
        group_layout(wfbp_plan(3), [1, 2])


def test_plan_broadcast_round_trips_every_plan():
    for n in range(1, 8):
        for flags in itertools.product((False, True), repeat=n - 1):
            plan = MergePlan.from_merged_flags((False, *flags))
            code = [float(m) for m in plan.merged_flags()]  # what rank 0 contributes; the others add zeros
            assert decode_merged(code) == plan


@pytest.mark.parametrize("code", [[0.0, 2.0], [0.0, 0.5], [0.0, -1.0]])
def test_plan_broadcast_refuses_anything_but_one_contribution(code):
    with pytest.raises(ValueError, match="only 0 and 1"):
        decode_merged(code)


def test_plan_broadcast_refuses_a_merged_first_tensor():
    with pytest.raises(ValueError):
        decode_merged([1.0, 0.0])


def test_fit_sizes_span_the_model_geometrically():
    sizes = fit_sizes(2_600_000)
    assert sizes[0] == 256 and sizes[-1] == 2_600_000 and len(sizes) == 6
    ratios = [b / a for a, b in zip(sizes, sizes[1:])]
    assert max(ratios) / min(ratios) < 1.01


def test_fit_sizes_cap_large_models_and_widen_tiny_ones():
    assert fit_sizes(10**9)[-1] == 1 << 22
    small = fit_sizes(100)
    assert small[-1] == 16 * 256 and len(set(small)) == 6
    with pytest.raises(ValueError):
        fit_sizes(1000, count=1)
