"""``synclab calibrate gpu-check`` (:mod:`synclab.calibrate.gpu_check`): the backward-shape measure, and the report from the checked-in profiles."""


import pytest

from synclab.calibrate import gpu_check as check


def _profile(rows):
    return {"tensors": [{"params": p, "backward_seconds": t} for p, t in rows]}


def test_bytes_ready_counts_tensors_from_the_last_one_back():
    # forward order; backward makes the last tensor ready first: 100 params in the first half of backward
    p = _profile([(1, 0.5), (100, 0.5)])
    assert check.bytes_ready_at(p, (0.25, 0.5, 0.75)) == [0.0, pytest.approx(100 / 101), pytest.approx(100 / 101)]
    assert check.bytes_ready_at(_profile([(10, 1.0), (10, 1.0), (10, 1.0), (10, 1.0)]), (0.5,)) == [0.5]
