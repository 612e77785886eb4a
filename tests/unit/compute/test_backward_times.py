"""Per-tensor t_b from gradient-ready times (MG-WFBP eq. 6, §5.1): one rule, used by the profiler and ``mgwfbp``."""

from __future__ import annotations

import random
from types import SimpleNamespace

import pytest

from synclab.compute import profiler
from synclab.compute.profile import backward_times
from synclab.core import Stopwatch, param_layout
from synclab.models import build_model
from synclab.strategies.base import WorkerContext
from synclab.strategies.mgwfbp import MgWfbp, MgWfbpOptions
from synclab.transport.inbox import Inbox


def _eq6_ready(backward_start: float, t_b: list[float]) -> list[float]:
    """When eq. 6 says each tensor's gradient is ready: tau_b^(l) + t_b^(l), summed from the loss side."""
    ready, clock = [0.0] * len(t_b), backward_start
    for i in range(len(t_b) - 1, -1, -1):
        clock += t_b[i]
        ready[i] = clock
    return ready


def test_descending_ready_times_give_the_intervals_between_them():
    # backward starts at 1.0; tensors 3, 2, 1, 0 ready at 1.5, 1.75, 3.0, 3.25 (§5.1)
    assert backward_times(1.0, [3.25, 3.0, 1.75, 1.5]) == [0.25, 1.25, 0.25, 0.5]


def test_a_bias_ready_after_its_weight():
    # forward order: conv.weight, conv.bias, fc.weight, fc.bias. Backward from 0.0: fc.bias at 1.0, fc.weight
    # at 1.5, then the conv's weight at 4.0 and only then its bias at 4.25; backward returns at 4.5.
    ready = [4.0, 4.25, 1.5, 1.0]
    t_b = backward_times(0.0, ready, end=4.5)
    # conv.bias carries the conv's whole backward (from fc.weight's 1.5 to its own 4.25); conv.weight, ready
    # before it, adds nothing but the tail after the last gradient. (Ordering by time instead would give
    # conv.weight 2.5 and conv.bias 0.25: eq. 6 would then call the bias ready at 1.75, 2.5 s too early.)
    assert t_b == [0.25, 2.75, 0.5, 1.0]
    # eq. 6 with these t_b makes every tensor ready when it and every tensor sent before it (eq. 7) are
    assert _eq6_ready(0.0, t_b)[1:] == [max(ready[i:]) for i in range(1, 4)]
    assert _eq6_ready(0.0, t_b)[0] == 4.5


def test_t_b_is_never_negative_and_adds_up_to_the_whole_pass():
    rng = random.Random(4)
    for _ in range(200):
        ready = [rng.uniform(0, 1) for _ in range(rng.randint(1, 12))]
        t_b = backward_times(-0.5, ready)
        assert min(t_b) >= 0
        assert sum(t_b) == pytest.approx(max(ready) + 0.5)
        assert sum(backward_times(-0.5, ready, end=2.0)) == pytest.approx(2.5)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="one time per tensor"):
        backward_times(0.0, [])
    with pytest.raises(ValueError, match="before the last gradient"):
        backward_times(0.0, [1.0, 2.0], end=1.5)


class _StopwatchEngine:
    """Hands the ``mgwfbp`` strategy a fixed stopwatch, as an engine's ``run_iteration(stopwatch=True)`` does."""

    def __init__(self, clock: Stopwatch):
        self.clock = clock

    def run_iteration(self, iteration, x, y, start=None, *, stopwatch=False):
        assert stopwatch
        return SimpleNamespace(stopwatch=self.clock)


def test_the_profiler_and_the_mgwfbp_strategy_derive_the_same_t_b(monkeypatch):
    # smallcnn's convolutions have biases, and autograd makes each conv's weight gradient ready before its bias's
    calls = []

    def spy(backward_start, ready, end=None):
        calls.append((backward_start, list(ready), end))
        return backward_times(backward_start, ready, end)

    monkeypatch.setattr(profiler, "backward_times", spy)
    profile = profiler.measure_profile("smallcnn", batch_size=2, iterations=1, warmup=0)
    (backward_start, ready, end), = calls
    names = [t.name for t in profile.tensors]
    weight, bias = names.index("features.3.weight"), names.index("features.3.bias")
    assert ready[weight] < ready[bias]
    measured = [t.backward_seconds for t in profile.tensors]
    assert measured[weight] == 0.0
    assert measured[bias] == pytest.approx(ready[bias] - max(ready[bias + 1:]), abs=1e-8)

    # the strategy's rank 0, profiling iteration 1 on the same gradient-ready times
    infos, tensors, _ = param_layout(build_model("smallcnn"))
    options = MgWfbpOptions(profile_iterations=1)
    ctx = WorkerContext(rank=0, world=1, node="w0", params=infos, tensors=[t.detach() for t in tensors], lr=0.1,
                        momentum=0.0, weight_decay=0.0, seed=0, mark_fresh=lambda i: None, inbox=Inbox(),
                        worker_names={0: "w0"}, options=options,
                        plan=MgWfbp.make_plan(infos, ps_shards=0, workers=1, seed=0, options=options))
    strategy = MgWfbp(ctx)
    recorded = []
    strategy.record_profile = lambda iteration, t_f, t_b: recorded.append(t_b)
    strategy.run_iteration(_StopwatchEngine(Stopwatch(0.01, backward_start, tuple(ready))), 1, None, None, 0.0)
    (strategy_t_b,) = recorded
    # the same t_b for every tensor; the profile adds what followed the last gradient to tensor 0
    assert strategy_t_b[1:] == pytest.approx(measured[1:], abs=1e-8)
    assert strategy_t_b[0] + (end - max(ready)) == pytest.approx(measured[0], abs=1e-8)
