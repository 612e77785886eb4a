"""Pure helpers that run an MG-WFBP plan: buffer layout, plan broadcast, fit sizes (t_b: tests/unit/compute)."""

from __future__ import annotations

import itertools

import pytest

from synclab.plans.mgwfbp import (
    MergePlan,
    decode_merged,
    fit_sizes,
    group_layout,
    synceasgd_plan,
    wfbp_plan,
)


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
