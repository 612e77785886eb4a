"""``synclab calibrate startup`` and the validation grid's start-up columns: parsing and the emulated-clock
arithmetic."""

from __future__ import annotations

import pytest

from synclab.calibrate import startup
from synclab.validate import grid


def test_points_parse_and_bad_ones_are_refused():
    m = startup
    assert m.parse_points("2:1, 4:8") == [(2, 1.0), (4, 8.0)]
    for bad in ("2", "1:4", "2:0.5", "x:2"):
        with pytest.raises(ValueError):
            m.parse_points(bad)


def test_summary_is_on_the_emulated_clock_per_ring_message():
    m = startup
    plan = {"cost_fit": {"a": 0.008, "b": 40e-9, "r2": 0.99, "sizes": [1024, 7132, 49668, 345900],
                         "median_seconds": [0.010, 0.008, 0.012, 0.030]}}
    row = m.summarize(plan, workers=4, dilation=4)  # 6 messages per ring all-reduce; host seconds / 4
    assert row["a_s"] == pytest.approx(0.002) and row["a_per_message_s"] == pytest.approx(0.002 / 6)
    assert row["b_s_per_byte"] == pytest.approx(10e-9)
    assert row["small_host_s"] == pytest.approx(0.010)  # median of the 3 sizes <= 50 kB
    assert row["small_per_message_s"] == pytest.approx(0.010 / 4 / 6)


def test_sim_vs_emu_small_sizes_median():
    m = grid
    assert m.small_sizes_s({"sizes": [1024, 7132, 49668, 345900], "median_seconds": [3, 1, 2, 9]}) == 2
    assert m.small_sizes_s({"sizes": [345900], "median_seconds": [9]}) is None
