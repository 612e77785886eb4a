"""Whole-iteration and update timings (``synclab profile --zoo --plain``, ``--update-only``), and the in-process zoo run."""


import pytest

from synclab.compute.profiler import measure_plain_iteration_seconds, measure_update_seconds


def test_plain_iterations_are_timed_after_the_warmup():
    out = measure_plain_iteration_seconds("mlp", batch_size=4, iterations=3, warmup=1)
    assert out["iterations"] == 3
    assert 0 < out["min"] <= out["median"] <= out["max"]
    assert out["relative_spread"] == pytest.approx((out["max"] - out["min"]) / out["median"])
    med, spread = measure_update_seconds("mlp", iterations=2, warmup=0)
    assert med == spread["median"] > 0
