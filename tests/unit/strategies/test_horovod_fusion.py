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


def _worker(numels):
    import torch

    from synclab.core import ParamInfo
    from synclab.strategies.base import WorkerContext
    from synclab.strategies.horovod import Horovod
    from synclab.transport.inbox import Inbox

    params = [ParamInfo(i, f"t{i}", (n,), n, i) for i, n in enumerate(numels)]
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=params, tensors=[torch.zeros(n) for n in numels],
                        lr=0.1, momentum=0.0, weight_decay=0.0, seed=0, mark_fresh=lambda i: None, inbox=Inbox(),
                        options=HorovodOptions())
    return Horovod(ctx)


def test_a_group_consecutive_in_backward_order_is_fused_in_place():
    import torch

    h = _worker([2, 3, 4])
    for t in range(3):
        h._grads[t].copy_(torch.full((h._numels[t],), float(t)))
    fused = h._fusion_buffer((2, 1))            # backward order: tensor 2, then tensor 1
    assert fused.data_ptr() == h._grads[2].data_ptr() and fused.tolist() == [2.0] * 4 + [1.0] * 3
    fused.mul_(10)                               # in place: the tensors' own gradients change
    assert h._grads[1].tolist() == [10.0] * 3
    copied = h._fusion_buffer((2, 0))            # not consecutive: a copy, in the group's order
    assert copied.tolist() == [20.0] * 4 + [0.0] * 2
    assert copied.data_ptr() not in {g.data_ptr() for g in h._grads}
