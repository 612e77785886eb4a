"""All-reduce schedules: simulated over numbers, every rank must end with the full sum."""

from __future__ import annotations

import random

import pytest

from synclab.collective.schedules import (
    Step,
    Transfer,
    recursive_doubling_schedule,
    ring_allreduce_schedule,
    segment_bounds,
    simulate_allreduce,
)

RANKS = range(1, 18)
SCHEDULES = [ring_allreduce_schedule, recursive_doubling_schedule]


def _vectors(n: int, length: int, seed: int) -> list[list[int]]:
    rng = random.Random(seed)
    return [[rng.randint(-1000, 1000) for _ in range(length)] for _ in range(n)]


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n", RANKS)
def test_every_rank_ends_with_the_sum(schedule, n):
    for length in (0, 1, n - 1, n, 3 * n + 2, 50):
        vectors = _vectors(n, max(length, 0), seed=n * 100 + length)
        expected = [sum(column) for column in zip(*vectors, strict=True)]
        assert simulate_allreduce(schedule(n), vectors) == [expected] * n


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n", RANKS)
def test_float_results_are_bitwise_identical_on_every_rank(schedule, n):
    # Stanza's footnote 3: every worker must apply the very same tensor
    rng = random.Random(n)
    vectors = [[rng.uniform(-1, 1) for _ in range(2 * n + 1)] for _ in range(n)]
    results = simulate_allreduce(schedule(n), vectors)
    assert all(result == results[0] for result in results)
    expected = [sum(column) for column in zip(*vectors, strict=True)]
    assert results[0] == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n", RANKS)
def test_each_rank_sends_and_receives_at_most_once_per_step(schedule, n):
    for step in schedule(n):
        assert step.op in ("reduce", "copy")
        sources = [t.src for t in step.transfers]
        destinations = [t.dst for t in step.transfers]
        assert len(set(sources)) == len(sources) and len(set(destinations)) == len(destinations)
        assert all(0 <= r < n for r in sources + destinations)
        assert all(t.src != t.dst for t in step.transfers)


@pytest.mark.parametrize("n", RANKS)
def test_recursive_doubling_rounds(n):
    power_of_two = n & (n - 1) == 0
    floor_log2 = n.bit_length() - 1
    expected = floor_log2 if power_of_two else floor_log2 + 2
    assert len(recursive_doubling_schedule(n)) == expected


def test_recursive_doubling_for_six_ranks_by_hand():
    # p = 4, surplus ranks 4 and 5 fold into 0 and 1, then 2 rounds, then back
    assert recursive_doubling_schedule(6) == [
        Step("reduce", (Transfer(4, 0), Transfer(5, 1))),
        Step("reduce", (Transfer(0, 1), Transfer(1, 0), Transfer(2, 3), Transfer(3, 2))),
        Step("reduce", (Transfer(0, 2), Transfer(1, 3), Transfer(2, 0), Transfer(3, 1))),
        Step("copy", (Transfer(0, 4), Transfer(1, 5))),
    ]


def test_recursive_doubling_pairs_are_two_to_the_round_apart():
    for step in recursive_doubling_schedule(16):
        distances = {abs(t.src - t.dst) for t in step.transfers}
        assert len(distances) == 1
    firsts = [step.transfers[0] for step in recursive_doubling_schedule(16)]
    assert [abs(t.src - t.dst) for t in firsts] == [1, 2, 4, 8]


def test_surplus_ranks_sit_out_the_core_rounds():
    schedule = recursive_doubling_schedule(11)  # p = 8, surplus 8, 9, 10
    for step in schedule[1:-1]:
        assert all(t.src < 8 and t.dst < 8 for t in step.transfers)
    assert {(t.src, t.dst) for t in schedule[0].transfers} == {(8, 0), (9, 1), (10, 2)}
    assert schedule[-1].op == "copy"


@pytest.mark.parametrize("n", RANKS)
def test_ring_shape(n):
    steps = ring_allreduce_schedule(n)
    assert len(steps) == 2 * (n - 1)
    assert [s.op for s in steps] == ["reduce"] * (n - 1) + ["copy"] * (n - 1)
    for step in steps:
        pairs = sorted((t.src, t.dst) for t in step.transfers)
        assert pairs == [(r, (r + 1) % n) for r in range(n)]
        assert sorted(t.segment for t in step.transfers) == list(range(n))


def test_ring_for_three_ranks_by_hand():
    assert ring_allreduce_schedule(3) == [
        Step("reduce", (Transfer(0, 1, 0), Transfer(1, 2, 1), Transfer(2, 0, 2))),
        Step("reduce", (Transfer(0, 1, 2), Transfer(1, 2, 0), Transfer(2, 0, 1))),
        Step("copy", (Transfer(0, 1, 1), Transfer(1, 2, 2), Transfer(2, 0, 0))),
        Step("copy", (Transfer(0, 1, 0), Transfer(1, 2, 1), Transfer(2, 0, 2))),
    ]


def test_single_rank_needs_no_steps():
    assert ring_allreduce_schedule(1) == [] and recursive_doubling_schedule(1) == []
    assert simulate_allreduce([], [[1, 2, 3]]) == [[1, 2, 3]]


def test_segment_bounds():
    assert segment_bounds(10, 3) == [(0, 4), (4, 7), (7, 10)]
    assert segment_bounds(2, 4) == [(0, 1), (1, 2), (2, 2), (2, 2)]
    assert segment_bounds(0, 2) == [(0, 0), (0, 0)]


@pytest.mark.parametrize("schedule", SCHEDULES)
@pytest.mark.parametrize("n", [0, -1, 2.0, True])
def test_bad_rank_counts_are_refused(schedule, n):
    with pytest.raises(ValueError, match="ranks"):
        schedule(n)


def test_simulator_refuses_ragged_vectors():
    with pytest.raises(ValueError, match="same length"):
        simulate_allreduce(ring_allreduce_schedule(2), [[1, 2], [3]])
