"""The public compute API (synclab.compute.engine's docstring), on real and replay compute alike: the split passes
hand over every gradient and match the whole model's; waits a strategy declares are not compute; the stopwatch;
the optimizer step."""

from __future__ import annotations

import time

import pytest
import torch
from torch import nn

from synclab.compute.engine import Engine, head_size
from synclab.compute.profile import parse_model_profile
from synclab.compute.replay import ReplayEngine
from synclab.core import param_layout


class Split(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(nn.Linear(4, 6), nn.ReLU(), nn.Linear(6, 5))
        self.classifier = nn.Sequential(nn.Linear(5, 7), nn.ReLU(), nn.Linear(7, 3))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class Keeper:
    """A fake strategy: keeps every gradient handed over, in order, and opens its gate."""

    def __init__(self, engine):
        self.engine, self.grads, self.ended = engine, [], []

    def on_gradient(self, iteration, index, grad):
        self.grads.append((index, grad.clone()))
        self.engine.mark_fresh(index)

    def on_backward_end(self, iteration):
        self.ended.append(iteration)


def attached(engine):
    keeper = Keeper(engine)
    engine.attach(keeper)
    return keeper


def batch():
    g = torch.Generator().manual_seed(1)
    return torch.randn(6, 4, generator=g), torch.tensor([0, 1, 2, 0, 1, 2])


def test_split_passes_give_the_whole_models_gradients():
    x, y = batch()
    whole, split = Engine(Split(), nn.CrossEntropyLoss(), torch.device("cpu")), None
    try:
        got_whole = attached(whole)
        whole.run_iteration(1, x, y)
        whole.wait_fresh()
        split = Engine(Split(), nn.CrossEntropyLoss(), torch.device("cpu"))
        got = attached(split)
        split.begin_iteration(1)
        b = split.head_forward(x, y)
        assert b.activations.shape == (6, 5) and not b.activations.requires_grad
        parts, labels = [b.activations[:4], b.activations[4:]], [b.labels[:4], b.labels[4:]]  # two head batches
        out = split.tail_step(parts, labels, 1.0)
        assert [g.shape for g in out.input_grads] == [(4, 5), (2, 5)] and [loss.shape for loss in out.losses] == [(1,), (1,)]
        split.head_backward(torch.cat(out.input_grads))
        timing = split.end_iteration(out.loss, 6)
        split.comm.stop()  # runs what was submitted, on_backward_end included, then ends
        assert timing.samples == 6 and got.ended == [1]
        n_head = head_size(split.infos)
        tail = [i for i, _ in got.grads[:len(split.infos) - n_head]]
        assert sorted(tail) == list(range(n_head, len(split.infos)))  # the tail's gradients, then the head's
        assert sorted(i for i, _ in got.grads[len(tail):]) == list(range(n_head))
        expected = dict(got_whole.grads)
        for i, g in got.grads:
            torch.testing.assert_close(g, expected[i])
        assert out.loss == pytest.approx(nn.CrossEntropyLoss()(Split()(x), y).item(), rel=1e-6)
    finally:
        whole.close()
        if split is not None:
            split.close()


def test_declared_waits_are_not_compute():
    engine = Engine(Split(), nn.CrossEntropyLoss(), torch.device("cpu"))
    attached(engine)
    try:
        engine.begin_iteration(1)
        with engine.waiting():
            time.sleep(0.2)
        timing = engine.end_iteration()
        assert timing.compute_s < 0.15 and timing.loss != timing.loss
    finally:
        engine.close()


def test_real_stopwatch_times_backward_in_order():
    engine = Engine(Split(), nn.CrossEntropyLoss(), torch.device("cpu"))
    attached(engine)
    try:
        timing = engine.run_iteration(1, *batch(), stopwatch=True)
        clock = timing.stopwatch
        assert clock.forward_s >= 0 and clock.backward_start >= timing.start
        last_layer_first = [clock.ready[i] for i in (len(engine.infos) - 1, 0)]
        assert clock.backward_start <= last_layer_first[0] <= last_layer_first[1]
        assert engine.run_iteration(2, *batch()).stopwatch is None
    finally:
        engine.close()


def test_update_runs_the_step_and_records_its_span():
    from synclab.transport.spans import SpanLog

    engine = Engine(Split(), nn.CrossEntropyLoss(), torch.device("cpu"))
    try:
        engine.spans = SpanLog("w", enabled=True)
        assert engine.update([0], lambda: "stepped", "unchanged") == "stepped"
        assert len(engine.spans) == 1
    finally:
        engine.close()


def replay_engine(fwd=0.01, bwd=0.02, boundary=True):
    with torch.device("meta"):
        meta = Split()
    infos, metas, layers = param_layout(meta)
    per = len(infos)
    profile = parse_model_profile({
        "model": "split", "batch_size": 4, "device": "cpu", "forward_seconds": fwd, "backward_seconds": bwd,
        "tensors": [{"name": i.name, "params": i.numel, "forward_seconds": fwd / per,
                     "backward_seconds": bwd / per, "kind": "fc"} for i in infos],
        **({"boundary": {"activations_per_sample": 5, "conv_params": 1, "fc_params": 1, "conv_seconds": 0.0,
                         "fc_seconds": 0.0}} if boundary else {})})
    return ReplayEngine(profile, infos, [torch.zeros(t.shape) for t in metas], len(layers), samples=4)


def test_replay_split_passes_take_the_profiled_time_and_hand_over_every_gradient():
    engine = replay_engine()
    got = attached(engine)
    try:
        n_head, n = head_size(engine.infos), len(engine.infos)
        engine.begin_iteration(1)
        b = engine.head_forward(None, None)
        assert b.activations.shape == (4, 5) and b.labels.shape == (4,)
        out = engine.tail_step([b.activations, b.activations], [b.labels, b.labels], 0.5)  # 2 head batches: 2x time
        assert [g.shape for g in out.input_grads] == [(4, 5), (4, 5)] and out.loss != out.loss
        with engine.waiting():
            time.sleep(0.05)
        engine.head_backward(out.input_grads[0])
        timing = engine.end_iteration(samples=4)
        engine.wait_fresh()  # every gradient went through the communication thread
        head_s, tail_s = 0.03 * n_head / n, 0.03 * (n - n_head) / n
        assert engine.due_s == pytest.approx(head_s + 2 * tail_s)
        assert timing.compute_s >= engine.due_s - 1e-9  # replay is never early; the declared wait is not compute
        assert [i for i, _ in got.grads] == list(reversed(range(n_head, n))) + list(reversed(range(n_head)))
    finally:
        engine.close()


def test_replay_split_needs_the_profiles_boundary():
    engine = replay_engine(boundary=False)
    attached(engine)
    try:
        engine.begin_iteration(1)
        with pytest.raises(ValueError, match="boundary"):
            engine.head_forward(None, None)
    finally:
        engine.close()


def test_replay_stopwatch_is_exact_to_the_schedule():
    engine = replay_engine(fwd=0.02, bwd=0.02)
    attached(engine)
    try:
        timing = engine.run_iteration(1, None, None, stopwatch=True)
        clock = timing.stopwatch
        assert clock.forward_s == pytest.approx(0.02, abs=1e-6) and all(t >= clock.backward_start for t in clock.ready)
    finally:
        engine.close()


def test_split_of_a_model_without_features_is_refused():
    engine = Engine(nn.Sequential(nn.Linear(2, 2)), nn.CrossEntropyLoss(), torch.device("cpu"))
    try:
        with pytest.raises(TypeError, match="features"):
            engine.head_forward(torch.zeros(1, 2), torch.zeros(1, dtype=torch.int64))
        with pytest.raises(ValueError, match="features"):
            head_size(engine.infos)
    finally:
        engine.close()
