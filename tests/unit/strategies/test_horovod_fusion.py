"""Horovod's tensor fusion: packing up to the threshold, and the simulated cycles."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from synclab.config import load_spec
from synclab.sim.run import simulate
from synclab.strategies.horovod import HorovodOptions, fuse

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=3", "run.warmup=1", "compute.scale=0.01", "strategy.name=horovod"]


def test_fuse_packs_in_order_up_to_the_threshold():
    numels = [1, 2, 3, 10, 1]  # float32: 4, 8, 12, 40, 4 bytes
    assert fuse([4, 3, 2, 1, 0], numels, threshold_bytes=16) == [(4,), (3,), (2,), (1, 0)]
    assert fuse([4, 2, 1, 0], numels, threshold_bytes=24) == [(4, 2, 1), (0,)]  # 4 + 12 + 8 = 24 fits
    assert fuse([], numels, threshold_bytes=24) == []


def test_misspelt_option_is_refused_by_name():
    with pytest.raises(ValidationError, match="cycle_time"):
        HorovodOptions(cycle_time=3)


def _events(*overrides):
    r = simulate(load_spec(QUICKSTART, [*BASE, *overrides]))
    ev = [e for e in r.events if e[0] == 2 and e[1] == 0]  # the steady iteration, rank 0
    return {k: sorted((e[4], e[2]) for e in ev if e[3] == k) for k in ("grad_ready", "send_start")}


def test_a_long_cycle_fuses_the_whole_backward_into_one_allreduce():
    ev = _events("strategy.cycle_time_ms=500", "strategy.fusion_threshold_mb=1000")
    starts = {t for t, _ in ev["send_start"]}
    assert len(starts) == 1 and len(ev["send_start"]) == len(ev["grad_ready"])
    assert min(starts) >= ev["grad_ready"][0][0] + 0.5  # one cycle after the first gradient


def test_a_tiny_threshold_sends_every_tensor_alone():
    ev = _events("strategy.cycle_time_ms=500", "strategy.fusion_threshold_mb=1e-9")
    times = [t for t, _ in ev["send_start"]]
    assert len(times) == len(ev["grad_ready"]) and len(set(times)) == len(times)
    assert [i for _, i in ev["send_start"]] == sorted((i for _, i in ev["grad_ready"]), reverse=True)
