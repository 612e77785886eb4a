"""``synceasgd``, ``mgwfbp`` and ``mgwfbp-opt`` on two in-process ranks: the real ring, links swapped for a loopback.

They change when bytes move, never the math: after every iteration both ranks
hold what ``torch.optim.SGD`` computes from the averaged gradients.
"""

from __future__ import annotations

import json
from concurrent.futures import Future, ThreadPoolExecutor

import pytest
import torch

from synclab.core import ParamInfo
from synclab.plans.mgwfbp import CostModel, MergePlan, algorithm1, optimal_plan
from synclab.strategies.base import WorkerContext
from synclab.strategies.mgwfbp import MgWfbp, MgWfbpOpt, MgWfbpOptions
from synclab.strategies.synceasgd import SyncEasgd
from synclab.transport.inbox import Inbox
from synclab.wire.frames import Received

SHAPES = [(4, 3), (4,), (2, 4), (2,)]
LR, MOMENTUM, WD = 0.1, 0.9, 0.01
# t_f, t_b (seconds) and T(M) = 1 s + 0 * M: Algorithm 1 sends (3), (2, 1), (0); the optimum one message
T_F, T_B, COST = 0.5, [1.0, 0.1, 2.0, 0.1], CostModel(1.0, 0.0)


class LoopbackLink:
    """Stands in for a transport link: hands every message straight to the peer's inbox."""

    def __init__(self, sender: str, inbox: Inbox):
        self.sender, self.inbox = sender, inbox

    def send(self, msg) -> Future:
        tensor = None if msg.tensor is None else msg.tensor.clone()
        self.inbox.deliver(Received(msg.mid, self.sender, msg.priority, tensor))
        done: Future = Future()
        done.set_result(None)
        return done


class Rank:
    def __init__(self, ctx: WorkerContext):
        self.ctx = ctx
        self.events: list[tuple[int, int, str]] = []
        self.fresh: list[int] = []
        ctx.record_event = lambda it, i, ev: self.events.append((it, i, ev))
        ctx.mark_fresh = self.fresh.append

    def sends(self, iteration: int) -> list[int]:
        return [i for it, i, ev in self.events if it == iteration and ev == "send_start"]


def _pair(cls, tmp_path, options=None) -> list[tuple[Rank, object]]:
    torch.manual_seed(0)
    initial = [torch.randn(s) for s in SHAPES]
    infos = [ParamInfo(i, f"t{i}", s, int(torch.Size(s).numel()), i // 2) for i, s in enumerate(SHAPES)]
    inboxes = [Inbox(), Inbox()]
    names = {0: "w0", 1: "w1"}
    pair = []
    for r in range(2):
        ctx = WorkerContext(rank=r, world=2, node=names[r], params=infos, tensors=[t.clone() for t in initial],
                            lr=LR, momentum=MOMENTUM, weight_decay=WD, seed=0, mark_fresh=None, inbox=inboxes[r],
                            worker_names=names, options=options or MgWfbpOptions(), run_dir=tmp_path,
                            plan=cls.make_plan(infos, ps_shards=0, workers=2, seed=0,
                                               options=options or MgWfbpOptions()))
        ctx.peer_links[1 - r] = LoopbackLink(names[r], inboxes[1 - r])
        rank = Rank(ctx)
        pair.append((rank, cls(ctx)))
    return pair


def _both(fn):
    """Run fn(rank_index) on two threads, as two workers' communication threads would."""
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(fn, r) for r in range(2)]
        return [f.result(timeout=30) for f in futures]


def _grads(iteration: int, rank: int) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(100 * iteration + rank)
    return [torch.randn(s, generator=g) for s in SHAPES]


def _reference(iterations: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    params = [torch.randn(s).requires_grad_() for s in SHAPES]
    opt = torch.optim.SGD(params, lr=LR, momentum=MOMENTUM, weight_decay=WD)
    for it in range(1, iterations + 1):
        for p, g0, g1 in zip(params, _grads(it, 0), _grads(it, 1)):
            p.grad = (g0 + g1) / 2
        opt.step()
    return [p.detach() for p in params]


def _iteration(pair, iteration: int, order=(3, 2, 1, 0)):
    def step(r):
        rank, strategy = pair[r]
        grads = _grads(iteration, r)
        for i in order:
            strategy.on_gradient(iteration, i, grads[i].clone())
        strategy.on_backward_end(iteration)
    _both(step)


def _assert_matches_reference(pair, iterations: int):
    for rank, _ in pair:
        for got, want in zip(rank.ctx.tensors, _reference(iterations)):
            torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)


def test_synceasgd_sends_one_message_after_backward_and_matches_sgd(tmp_path):
    pair = _pair(SyncEasgd, tmp_path)
    for it in (1, 2, 3):
        _iteration(pair, it)
        _assert_matches_reference(pair, it)
    for rank, _ in pair:
        assert rank.fresh == [0, 1, 2, 3] * 3
        assert rank.sends(2) == [0, 1, 2, 3]  # all at once, after the last gradient


@pytest.mark.parametrize("cls, find, groups", [(MgWfbp, algorithm1, ((3,), (2, 1), (0,))),
                                               (MgWfbpOpt, optimal_plan, ((3, 2, 1, 0),))])
def test_mgwfbp_profiles_then_every_rank_adopts_rank_0s_plan(tmp_path, cls, find, groups):
    pair = _pair(cls, tmp_path, MgWfbpOptions(profile_iterations=2))
    rank0 = pair[0][1]
    rank0.cost = COST  # what setup() fits on a live cluster
    for it in (1, 2):
        rank0.record_profile(it, T_F, T_B)
        _iteration(pair, it)
        _assert_matches_reference(pair, it)
        assert pair[0][0].sends(it) == [3, 2, 1, 0]  # profiling iterations are WFBP: one tensor at a time
    want = find(T_F, T_B, [4 * n for n in (12, 4, 8, 2)], COST)
    assert want.groups == groups
    assert pair[0][1].plan == want and pair[1][1].plan == want
    record = json.loads((tmp_path / "plan.json").read_text())
    assert record["status"] == "planned" and record["strategy"] == cls.name
    assert record["groups"] == [list(g) for g in want.groups] and record["merged"] == list(want.merged_flags())
    assert (record["a"], record["b"], record["t_f"]) == (1.0, 0.0, T_F)
    assert [t["t_b"] for t in record["tensors"]] == T_B
    assert set(record["predicted_iteration_seconds"]) >= {"wfbp", "synceasgd", "mgwfbp"}
    for it in (3, 4):
        _iteration(pair, it)
        _assert_matches_reference(pair, it)


def test_mgwfbp_sends_groups_in_plan_order_whatever_order_gradients_arrive(tmp_path):
    pair = _pair(MgWfbp, tmp_path, MgWfbpOptions(profile_iterations=1))
    pair[0][1].cost = COST
    pair[0][1].record_profile(1, T_F, T_B)
    _iteration(pair, 1)
    assert pair[1][1].plan == MergePlan(((3,), (2, 1), (0,)))
    _iteration(pair, 2, order=(1, 3, 0, 2))  # 0 is in before its turn; (2, 1) waits for 2
    _iteration(pair, 3, order=(3, 1, 2, 0))
    for rank, _ in pair:
        assert rank.sends(2) == rank.sends(3) == [3, 2, 1, 0]
        assert sorted(rank.fresh) == sorted([0, 1, 2, 3] * 3)
    _assert_matches_reference(pair, 3)


def test_mgwfbp_without_profiles_keeps_to_wfbp(tmp_path):
    pair = _pair(MgWfbp, tmp_path, MgWfbpOptions(profile_iterations=5))
    for it in (1, 2):
        _iteration(pair, it)
    assert pair[0][1].plan is None and pair[1][1].plan is None
    assert pair[0][0].sends(2) == [3, 2, 1, 0]
    _assert_matches_reference(pair, 2)
