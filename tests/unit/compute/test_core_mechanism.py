"""The worker's core mechanism with a fake strategy: gates, gradient hand-over, comm failures, the delay line.

DESIGN "Data flow" 1-2: a layer's forward waits until its parameters are fresh;
backward hands every gradient to the communication thread as it is produced,
last layer first; a failure on the communication thread stops training with
CommFailed. The app backend's delay line holds every frame for the delay.
"""

from __future__ import annotations

import threading
import time

import pytest
import torch
from torch import nn

from synclab.compute.engine import Engine, FreshGates
from synclab.core import CommFailed, ParamInfo
from synclab.transport.link import Link, NullMeter
from synclab.transport.shaper import LinkShaper
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId


class Recorder:
    """A fake strategy: records gradients in arrival order; opens every gate at once, or on request."""

    def __init__(self, engine: Engine, auto_fresh: bool = True, fail_on: int | None = None):
        self.engine, self.auto_fresh, self.fail_on = engine, auto_fresh, fail_on
        self.grads: list[tuple[int, int]] = []
        self.backward_ends: list[int] = []
        self.backward_ended = threading.Event()

    def on_gradient(self, iteration, index, grad):
        if index == self.fail_on:
            raise ConnectionError(f"link to the peer broke while sending tensor {index}")
        self.grads.append((iteration, index))
        if self.auto_fresh:
            self.engine.mark_fresh(index)

    def on_backward_end(self, iteration):
        self.backward_ends.append(iteration)
        self.backward_ended.set()


def small_model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 3))


def batch():
    return torch.randn(5, 4), torch.tensor([0, 1, 2, 0, 1])


def engine_with(strategy_kw=None) -> tuple[Engine, Recorder]:
    engine = Engine(small_model(), nn.CrossEntropyLoss(), torch.device("cpu"))
    rec = Recorder(engine, **(strategy_kw or {}))
    engine.attach(rec)
    return engine, rec


def test_gradients_are_handed_over_in_backward_order():
    engine, rec = engine_with()
    try:
        x, y = batch()
        engine.run_iteration(1, x, y)
        engine.wait_fresh()
        n = len(engine.infos)
        # backward: the last layer's tensors first; a layer's weight and bias may come in either order
        layers = [engine.infos[i].layer for _, i in rec.grads]
        assert layers == sorted(layers, reverse=True)
        assert sorted(i for _, i in rec.grads) == list(range(n))
        assert {it for it, _ in rec.grads} == {1}
        # on_backward_end follows every gradient of the iteration on the same (ordered) thread; the gates open from
        # on_gradient, so wait_fresh may return before that thread has delivered on_backward_end
        assert rec.backward_ended.wait(10)
        assert rec.backward_ends == [1]
        assert all(p.grad is None for p in engine.tensors)  # released, so the next backward starts clean
    finally:
        engine.close()


class LateWork(Recorder):
    """Opens each gate, then keeps working on the comm thread (as SSD-SGD issues a pull after marking fresh)."""

    def __init__(self, engine):
        super().__init__(engine)
        self.finished: list[int] = []

    def on_gradient(self, iteration, index, grad):
        super().on_gradient(iteration, index, grad)
        time.sleep(0.05)
        self.finished.append(index)


def test_drain_comm_returns_only_after_every_callback_has_run():
    engine = Engine(small_model(), nn.CrossEntropyLoss(), torch.device("cpu"))
    late = LateWork(engine)
    engine.attach(late)
    try:
        engine.run_iteration(1, *batch())
        engine.wait_fresh()
        n = len(engine.infos)
        assert len(late.finished) < n, "the gates opened only after every callback ended: nothing to drain"
        engine.drain_comm()
        assert sorted(late.finished) == list(range(n)) and late.backward_ends == [1]
    finally:
        engine.close()


def test_drain_comm_raises_a_callback_failure_instead_of_waiting_for_it():
    engine, _ = engine_with()

    def broken():
        time.sleep(0.05)
        raise ConnectionError("link to the peer broke while sending tensor 2")

    try:
        engine.comm.submit(broken)
        with pytest.raises(CommFailed, match="sending tensor 2"):
            engine.drain_comm()  # the thread stopped at the failure: the marker behind it never runs
    finally:
        engine.close()


def test_gates_open_only_when_fresh():
    infos = [ParamInfo(0, "a.weight", (2,), 2, 0), ParamInfo(1, "a.bias", (2,), 2, 0),
             ParamInfo(2, "b.weight", (2,), 2, 1)]
    gates = FreshGates(infos, n_layers=2)
    assert gates.is_open(0) and gates.is_open(1)
    gates.mark_stale(0, iteration=3)
    gates.mark_stale(1, iteration=3)
    gates.mark_stale(2, iteration=3)
    assert not gates.is_open(0) and not gates.is_open(1)
    gates.mark_fresh(0)
    assert not gates.is_open(0), "layer 0 still has a stale bias"
    gates.mark_fresh(1)
    assert gates.is_open(0) and not gates.is_open(1)
    assert 3 not in gates.synced_at
    gates.mark_fresh(2)
    assert gates.is_open(1) and 3 in gates.synced_at
    with pytest.raises(RuntimeError, match="marked fresh twice"):
        gates.mark_fresh(2)


def test_forward_waits_at_a_stale_layer_until_the_strategy_marks_it_fresh():
    engine, rec = engine_with({"auto_fresh": False})
    try:
        x, y = batch()
        engine.run_iteration(1, x, y)
        assert rec.backward_ended.wait(10)
        assert len(rec.grads) == len(engine.infos)
        result = {}
        second = threading.Thread(target=lambda: result.setdefault("timing", engine.run_iteration(2, x, y)))
        second.start()
        second.join(timeout=0.5)
        assert second.is_alive(), "forward ran on stale parameters"
        for i in range(len(engine.infos)):
            engine.mark_fresh(i)
        second.join(timeout=10)
        assert not second.is_alive()
        # the wait is counted as gate wait, not compute (one-sided: the thread waited at least ~0.5 s)
        assert result["timing"].gate_wait_s >= 0.4
    finally:
        engine.close()


def test_a_comm_failure_surfaces_in_the_training_thread():
    engine, rec = engine_with({"fail_on": 2})
    try:
        x, y = batch()
        with pytest.raises(CommFailed, match="link to the peer broke while sending tensor 2"):
            # the failure reaches the training thread at the latest at the next gate it waits on
            for it in (1, 2, 3):
                engine.run_iteration(it, x, y)
            engine.wait_fresh()
    finally:
        engine.close()


def _frame_times(shaper: LinkShaper, n_messages: int) -> tuple[list[float], list[str]]:
    link = Link("w0", "ps0", policy="fifo", chunk_bytes=1 << 16, capacity_bytes=1 << 24, shaper=shaper,
                meter=NullMeter())
    sent_at = time.monotonic()
    for k in range(n_messages):
        link.send(Message(MessageId(pb.GRADIENT, f"t{k}"), torch.zeros(16)))
    link.close()
    times, keys = [], []
    for frame in link.frames():
        times.append(time.monotonic() - sent_at)
        keys.append(frame.header.key)
    return times, keys


def test_the_delay_line_delays_every_frame_by_at_least_the_delay_in_order():
    delay = 0.3
    times, keys = _frame_times(LinkShaper(delay_s=delay), 5)
    assert keys == [f"t{k}" for k in range(5)]
    assert min(times) >= delay
    # frames are pipelined through the delay, not serialized by it: 5 frames take far less than 5 delays
    assert max(times) < 5 * delay
