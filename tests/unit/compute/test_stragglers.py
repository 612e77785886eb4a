"""synclab.compute.stragglers: fixed and random per-worker compute factors; the replay engine's clock."""

from __future__ import annotations

import pytest

from synclab.compute.stragglers import compute_factors


def test_fixed_slowdown_per_rank_and_one_beyond_the_list():
    assert compute_factors(1, 3, slowdown=[1.0, 2.5]) == [2.5, 2.5, 2.5]
    assert compute_factors(2, 2, slowdown=[1.0, 2.5]) == [1.0, 1.0]


def test_random_episodes_are_seeded_last_their_duration_and_have_the_asked_rate():
    a = compute_factors(0, 4000, probability=0.05, factor=3.0, duration=4, seed=7)
    assert a == compute_factors(0, 4000, probability=0.05, factor=3.0, duration=4, seed=7)
    assert a != compute_factors(1, 4000, probability=0.05, factor=3.0, duration=4, seed=7)
    assert set(a) == {1.0, 3.0}
    runs, n = [], 0
    for f in a + [1.0]:
        if f == 3.0:
            n += 1
        elif n:
            runs.append(n)
            n = 0
    assert all(r % 4 == 0 for r in runs)  # back-to-back episodes join; each lasts 4 iterations
    # an episode starts with p = 0.05 at each iteration outside one: a share of 4p / (1 + 4p) = 1/6 straggles
    assert a.count(3.0) / len(a) == pytest.approx(1 / 6, abs=0.03)


def test_slowdown_and_episode_multiply():
    f = compute_factors(0, 200, slowdown=[1.5], probability=0.5, factor=2.0, seed=1)
    assert set(f) == {1.5, 3.0}


@pytest.mark.parametrize("kw", [{"probability": 1.5}, {"factor": 0.0}, {"duration": 0}, {"slowdown": [0.0]}])
def test_bad_values_are_refused(kw):
    with pytest.raises(ValueError):
        compute_factors(0, 3, **kw)
