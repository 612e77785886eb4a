"""ByteScheduler: partitioning, the credit scheduler's order and window, the plan, and the simulated schedule."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from pydantic import ValidationError

from synclab.config import load_spec
from synclab.core import ParamInfo, param_layout
from synclab.models import build_model
from synclab.sim.run import simulate
from synclab.strategies.bytescheduler import (
    ByteScheduler,
    ByteSchedulerOptions,
    CreditScheduler,
    partition_tensors,
)

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=3", "run.warmup=1", "compute.scale=0.01",
        "strategy.name=bytescheduler"]


def test_partitions_are_near_equal_and_no_larger_than_the_partition_size():
    parts = partition_tensors([10, 3, 1000], partition_bytes=16)  # 4 float32 per partition at most
    by_tensor = {}
    for p in parts:
        by_tensor.setdefault(p.tensor, []).append(p)
        assert p.length * 4 <= 16 and p.priority == p.tensor
    assert [(p.offset, p.length) for p in by_tensor[0]] == [(0, 4), (4, 3), (7, 3)]  # ceil(40/16) = 3 parts
    assert [(p.offset, p.length) for p in by_tensor[1]] == [(0, 3)]                  # 12 bytes: whole
    assert len(by_tensor[2]) == 250 and sum(p.length for p in by_tensor[2]) == 1000
    assert [p.tensor for p in parts] == sorted(p.tensor for p in parts)                # forward order


def test_a_partition_smaller_than_one_element_is_refused():
    with pytest.raises(ValueError, match="partition_bytes"):
        partition_tensors([10], partition_bytes=3)


def test_the_most_urgent_ready_task_starts_first_and_a_late_urgent_one_overtakes_the_queue():
    s = CreditScheduler(credit_bytes=100)
    for task, prio in [(7, 3), (8, 3), (5, 2)]:  # backward order: the later layers are ready first
        s.ready(task, prio, 100)
    assert s.next() == 5 and s.next() is None    # the window is full after one 100-byte task
    s.ready(0, 0, 100)                            # the front layer becomes ready last...
    s.finished(100)
    assert s.next() == 0                          # ...and goes before the tasks queued before it
    s.finished(100)
    assert s.start_all() == [7]                   # equal priority: in the order they became ready
    s.finished(100)
    assert s.start_all() == [8] and s.waiting == 0


def test_the_credit_window_admits_tasks_while_the_bytes_in_flight_are_below_it():
    s = CreditScheduler(credit_bytes=250)
    for k in range(5):
        s.ready(k, k, 100)
    assert s.start_all() == [0, 1, 2]             # 0, 100, 200 < 250 in flight when each started
    assert s.in_flight == 300
    s.finished(100)
    assert s.start_all() == [3] and s.in_flight == 300   # 200 < 250: one more, then full again
    s.finished(100)
    s.finished(100)
    assert s.start_all() == [4] and s.in_flight == 200


def test_options_are_refused_by_name():
    with pytest.raises(ValidationError, match="credit"):
        ByteSchedulerOptions(credit=3)
    with pytest.raises(ValidationError, match="architecture"):
        ByteSchedulerOptions(architecture="ps")
    with pytest.raises(ValidationError, match="partition_bytes"):
        ByteSchedulerOptions(partition_bytes=0)


def test_the_plan_covers_every_tensor_once():
    params = [ParamInfo(i, f"t{i}", (n,), n, i // 2) for i, n in enumerate([5000, 50, 70000, 3])]
    plan = ByteScheduler.make_plan(params, ps_shards=0, workers=2, seed=0,
                                   options=ByteSchedulerOptions(partition_bytes=8000, credit_bytes=16000))
    for t, p in enumerate(params):
        own = sorted((q.offset, q.length) for q in plan.partitions if q.tensor == t)
        assert own[0][0] == 0 and sum(n for _, n in own) == p.numel
        assert all(a + n == b for (a, n), (b, _) in zip(own, own[1:]))
        assert len(own) == math.ceil(p.numel * 4 / 8000)
    assert plan.credit_bytes == 16000 and plan.architecture == "allreduce"


def _steady(*overrides):
    r = simulate(load_spec(QUICKSTART, [*BASE, *overrides]))
    ev = [e for e in r.events if e[0] == 2 and e[1] == 0]  # the steady iteration, rank 0
    return r, {k: {e[2]: e[4] for e in ev if e[3] == k} for k in ("grad_ready", "send_start", "send_end")}


def test_simulated_one_at_a_time_window_sends_the_most_urgent_ready_tensor_next():
    # whole tensors (a partition larger than any), a credit of one byte: one tensor in flight at a time
    _, ev = _steady("strategy.partition_bytes=1000000000", "strategy.credit_bytes=4")
    start, end, ready = ev["send_start"], ev["send_end"], ev["grad_ready"]
    assert set(start) == set(ready)
    order = sorted(start, key=start.get)
    for a, b in zip(order, order[1:]):
        assert start[b] >= end[a]  # the window holds one tensor: b starts once a is reduced
        waiting = [t for t in order if ready[t] <= start[b] and start[t] >= start[b]]
        assert b == min(waiting)   # of those ready and not started, the front-most
    assert order != sorted(start, key=ready.get)  # the priority order is not backward's order here


def test_simulated_bytes_are_each_partitions_ring_share():
    r, _ = _steady("strategy.partition_bytes=40000", "strategy.credit_bytes=100000")
    parts = partition_tensors(_numels("smallcnn"), 40000)
    per_iteration = sum(2 * (2 - 1) * math.ceil(p.length / 2) * 4 for p in parts)  # 2 workers
    assert r.bytes_sent["worker0"] == 3 * per_iteration


def _numels(model: str) -> list[int]:
    with torch.device("meta"):
        infos, _, _ = param_layout(build_model(model))
    return [i.numel for i in infos]


def test_a_large_window_starts_every_ready_tensor_at_once():
    _, ev = _steady("strategy.partition_bytes=1000000000", "strategy.credit_bytes=1000000000")
    start, ready = ev["send_start"], ev["grad_ready"]
    assert all(abs(start[t] - ready[t]) < 1e-3 for t in start)  # nothing waits for the window
