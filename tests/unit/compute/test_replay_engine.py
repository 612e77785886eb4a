"""ReplayEngine: profiled time passes per layer and tensor, gradients of the real shapes go out in backward order,
gates hold the forward pass, and the scheduling error is reported."""

from __future__ import annotations

import threading
import time

import pytest
import torch

from synclab.compute.profile import parse_model_profile
from synclab.compute.replay import ReplayEngine, lazy_zeros, sleep_until
from synclab.core import param_layout
from synclab.models import build_model
from synclab.strategies.base import Strategy

# Replay waits until absolute deadlines; a duration read back as a difference of two clock readings can come out
# a few ulps under the profiled time, so "never early" is checked to within this.
ULP = 1e-6


class Recorder(Strategy):
    """Records what the engine hands over (the engine's only contract with a strategy)."""

    name = "recorder"

    def __init__(self):
        self.grads: list[tuple[int, int, tuple]] = []
        self.ended: list[int] = []

    def on_gradient(self, iteration, index, grad):
        self.grads.append((iteration, index, tuple(grad.shape)))

    def on_backward_end(self, iteration):
        self.ended.append(iteration)


def engine_for(model_name="mlp", fwd=0.004, bwd=0.006, update=None, **kw):
    with torch.device("meta"):
        meta = build_model(model_name)
    infos, metas, layers = param_layout(meta)
    per = len(infos)
    profile = parse_model_profile({
        "model": model_name, "batch_size": 4, "device": "cpu", "forward_seconds": fwd, "backward_seconds": bwd,
        "update_seconds": update, "tensors": [{"name": i.name, "params": i.numel, "forward_seconds": fwd / per, "backward_seconds": bwd / per,
                     "kind": "fc"} for i in infos]})
    tensors = [torch.zeros(t.shape) for t in metas]
    eng = ReplayEngine(profile, infos, tensors, len(layers), **kw)
    rec = Recorder()
    eng.attach(rec)
    return eng, rec, infos


def test_sleep_until_is_never_early():
    for dt in (0.0, 0.0003, 0.002, 0.01):
        deadline = time.perf_counter() + dt
        sleep_until(deadline)
        assert time.perf_counter() >= deadline


def test_iteration_takes_the_profiled_time_and_hands_over_every_gradient_backward():
    eng, rec, infos = engine_for(fwd=0.02, bwd=0.03, time_factor=2.0, samples=4)
    try:
        timing = eng.run_iteration(1, None, None, stopwatch=True)
        eng.comm.stop()
        assert timing.compute_s >= 0.1 - ULP  # (20 + 30 ms) x 2: replay is never early
        assert timing.schedule_error_s == pytest.approx(timing.compute_s - 0.1, abs=1e-9)
        assert timing.samples == 4 and timing.loss != timing.loss  # no loss in replay: NaN
        assert [i for _, i, _ in rec.grads] == list(reversed(range(len(infos))))
        assert [s for _, _, s in rec.grads] == [info.shape for info in reversed(infos)]
        assert rec.ended == [1]
        clock = timing.stopwatch
        assert clock.forward_s >= 0.04 - ULP and clock.backward_start >= timing.start + 0.04 - ULP
        ready = [clock.ready[i] for i in reversed(range(len(infos)))]  # backward order, each after the last
        assert ready == sorted(ready) and ready[0] >= clock.backward_start
    finally:
        eng.close()


def test_forward_waits_on_gates_and_the_wait_is_not_compute():
    eng, rec, infos = engine_for(fwd=0.01, bwd=0.01)
    try:
        eng.gates.mark_stale(0)  # layer 0's parameter is in flight
        threading.Timer(0.2, eng.mark_fresh, args=(0,)).start()
        timing = eng.run_iteration(1, None, None)
        assert timing.gate_wait_s >= 0.15
        assert timing.compute_s < timing.gate_wait_s
        assert timing.compute_s >= 0.02 - ULP
    finally:
        eng.close()


def test_batch_factor_scales_the_time():
    eng, rec, infos = engine_for(fwd=0.01, bwd=0.01, batch_factor=3.0)
    try:
        assert eng.run_iteration(1, None, None).compute_s >= 0.06 - ULP
        assert eng.due_s == pytest.approx(0.06)
    finally:
        eng.close()


def test_update_wait_takes_the_tensors_share_of_the_profiled_step():
    eng, _, infos = engine_for(update=0.02, time_factor=2.0)
    try:
        total = sum(i.numel for i in infos)
        assert sum(eng.update_s) == pytest.approx(0.04)
        assert eng.update_s[0] == pytest.approx(0.04 * infos[0].numel / total)
        t0 = time.perf_counter()
        ran = []
        assert eng.update(range(len(infos)), lambda: ran.append(1), "unchanged") == "unchanged"
        assert time.perf_counter() - t0 >= 0.04 - ULP and ran == []  # the profiled time passed, no arithmetic
    finally:
        eng.close()


def test_profile_without_update_keeps_the_real_arithmetic():
    from synclab.strategies.base import WorkerContext
    from synclab.transport.inbox import Inbox

    eng, _, infos = engine_for()
    timed, _, _ = engine_for(update=0.02)
    try:
        assert eng.update_s is None
        t = torch.ones(4)
        ctx = WorkerContext(rank=0, world=1, node="w", params=infos, tensors=[t], lr=0.5, momentum=0.0,
                            weight_decay=0.0, seed=0, mark_fresh=lambda i: None, inbox=Inbox(), update=eng.update)
        ctx.sgd_(0, torch.ones(4), None)
        assert torch.equal(t, torch.full((4,), 0.5))
        ctx.update = timed.update
        ctx.sgd_(0, torch.ones(4), None)
        assert torch.equal(t, torch.full((4,), 0.5))  # replay with update_seconds: time passes, weights stay
    finally:
        eng.close()
        timed.close()


def _rss_bytes() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS"))


def test_lazy_zeros_are_separate_zero_tensors_of_the_given_layout():
    like = [torch.empty(3, 5), torch.empty(7, dtype=torch.float64), torch.empty(0), torch.empty(2, dtype=torch.int64)]
    zs = lazy_zeros(like)
    assert [(z.shape, z.dtype) for z in zs] == [(t.shape, t.dtype) for t in like]
    assert all(z.is_contiguous() and not z.any() for z in zs)
    zs[0].add_(1.0)  # a write stays in its own tensor
    assert zs[0].eq(1.0).all() and not zs[1].any() and not zs[3].any()


def test_lazy_zeros_cost_no_resident_memory_until_written():
    n = 64 << 20  # 256 MiB of float32
    before = _rss_bytes()
    (z,) = lazy_zeros([torch.empty(n)])
    assert float(z.sum()) == 0.0  # every page read
    read = _rss_bytes() - before
    z[: n // 2].fill_(1.0)  # half the pages written
    written = _rss_bytes() - before
    assert read < n * 4 // 8, f"reading lazy zeros made {read} bytes resident"
    assert written > n * 4 // 4, f"writing half of them made only {written} bytes resident"
