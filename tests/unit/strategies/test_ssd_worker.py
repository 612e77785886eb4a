"""SSD-SGD's worker (Algorithms 1-2) and the ASGD worker against in-process shards: no sockets, no processes.

A fake link hands each message straight to a real :class:`Shard`; the shard's
replies go straight into the worker's real :class:`Inbox`. The tests drive the
strategy's hooks as the engine would (gradients in backward order, then
``on_backward_end``) and watch what goes to the servers and when gates open.
"""

from concurrent.futures import Future

import pytest
import torch

from synclab.core import ParamInfo
from synclab.plans.sharding import kvstore_partitions
from synclab.ps.shard import Shard
from synclab.strategies import WorkerContext
from synclab.strategies.asgd import Asgd
from synclab.strategies.ssdsgd import SsdSgd, SsdSgdOptions
from synclab.transport.inbox import Inbox
from synclab.wire import pb
from synclab.wire.frames import Received


class FakeLink:
    def __init__(self, sender: str, shard: Shard, log: list):
        self.sender, self.shard, self.log = sender, shard, log

    def send(self, msg):
        self.log.append((self.sender, msg.mid.kind, msg.mid.key, msg.mid.iteration))
        tensor = None if msg.tensor is None else msg.tensor.clone()
        self.shard.handle(Received(msg.mid, self.sender, msg.priority, tensor))
        done = Future()
        done.set_result(None)
        return done


class Cluster:
    """``workers`` strategy instances of ``cls`` sharing one shard that holds every tensor."""

    def __init__(self, cls, sizes, *, workers=1, lr=0.1, momentum=0.9, weight_decay=0.0, mode=None, **options):
        self.params = [ParamInfo(i, f"t{i}", (n,), n, i) for i, n in enumerate(sizes)]
        opts = cls.Options(**options)
        plan = cls.make_plan(self.params, ps_shards=1, workers=workers, seed=0, options=opts)
        names = [f"worker{r}" for r in range(workers)]
        self.inboxes = {n: Inbox() for n in names}
        self.shard = Shard(0, kvstore_partitions([(p.name, p.numel) for p in self.params], 1), names, lr=lr,
                           momentum=momentum, weight_decay=weight_decay, mode=mode or plan.server_mode,
                           max_ahead=plan.max_ahead, send=lambda w, m: self.inboxes[w].deliver(
                               Received(m.mid, "ps0", m.priority, None if m.tensor is None else m.tensor.clone())))
        self.log, self.fresh, self.workers = [], [], []
        for r, name in enumerate(names):
            tensors = [torch.ones(n) for n in sizes]
            ctx = WorkerContext(rank=r, world=workers, node=name, params=self.params, tensors=tensors, lr=lr,
                                momentum=momentum, weight_decay=weight_decay, seed=0, inbox=self.inboxes[name],
                                mark_fresh=lambda i, r=r: self.fresh.append((r, i)), plan=plan, options=opts,
                                ps_links={0: FakeLink(name, self.shard, self.log)})
            self.workers.append(cls(ctx))
        self.workers[0].setup()

    def step(self, rank, iteration, grads):
        """One backward pass of worker ``rank``: gradients in backward order, then backward's end."""
        w = self.workers[rank]
        for index in reversed(range(len(grads))):
            w.on_gradient(iteration, index, torch.as_tensor(grads[index], dtype=torch.float32).reshape(-1))
        w.on_backward_end(iteration)

    def pulls(self, rank=0, key="t0"):
        return [it for s, kind, k, it in self.log if s == f"worker{rank}" and kind == pb.PULL_REQUEST and k == key]


def test_glu_steps_match_a_hand_computed_example():
    # lr 0.1, m 0.9, wd 0, k 2, alpha 2, beta 0.5, loc_lr 4 lr = 0.4; one warm-up iteration; w0 = 1
    c = Cluster(SsdSgd, [1], warmup=1, k=2)
    live = c.workers[0].ctx.tensors[0]
    expected_live = {
        1: 0.95,      # warm-up SSGD: buf 0.5, w1 = 1 - 0.1*0.5 (pulled)
        2: 0.75,      # d=0: pre = w' = 0.95, grad_sync 0; w' = 0.95 - 0.4*(2*0.25)
        3: 1.13,      # d=1: grad_sync = (0.95-0.75)*0.1/(0.1*2) = 0.1; w' = 0.75 - 0.4*(2*-0.5 + 0.5*0.1)
        4: 0.0587,    # d=2: w' = pulled w3 = 0.867; grad_sync = (0.95-0.867)*0.5 = 0.0415; pre = 0.867;
                      #      w' = 0.867 - 0.4*(2*1 + 0.5*0.0415)
        5: -0.42213,  # d=3: grad_sync = (0.867-0.0587)*0.5 = 0.40415; w' = 0.0587 - 0.4*(2*0.5 + 0.5*0.40415)
    }
    for it, g in zip(range(1, 6), [0.5, 0.25, -0.5, 1.0, 0.5]):
        c.step(0, it, [g])
        assert live.item() == pytest.approx(expected_live[it], abs=1e-5), it
    # server: momentum SGD on every pushed gradient (w2 0.88, w3 0.867, w4 0.7553, w5 0.60477);
    # the pull of iteration 5 put w5 into w' (the devices keep the GLU result)
    assert c.shard.value("t0").item() == pytest.approx(0.60477, abs=1e-5)
    assert c.workers[0]._local[0].item() == pytest.approx(0.60477, abs=1e-5)
    assert c.pulls() == [1, 3, 5]


def test_replay_keeps_no_copy_of_the_model_and_pulls_land_in_the_live_tensor():
    """Replay skips the GLU arithmetic (ctx.update returns ``unchanged``): w' stays the live tensor, no copy."""
    c = Cluster(SsdSgd, [4, 3], warmup=1, k=2)
    worker = c.workers[0]
    worker.ctx.update = lambda indices, step, unchanged: unchanged
    live = worker.ctx.tensors
    for it in range(1, 6):
        c.step(0, it, [torch.full((4,), 0.5), torch.full((3,), -0.25)])
        for i in (0, 1) if it > 1 else ():  # iteration 1 is the warm-up: no w' yet
            assert worker._local[i].untyped_storage().data_ptr() == live[i].untyped_storage().data_ptr()
            assert worker._pre_weight[i] is worker._local[i]
    # pulls at iterations 1 (warm-up), 3 and 5 (every k-th local update): the servers' weights are in the live tensors
    assert c.pulls(key="t0") == [1, 3, 5]
    for i, key in enumerate(("t0", "t1")):
        assert torch.equal(live[i], c.shard.value(key).reshape(live[i].shape))


@pytest.mark.parametrize("warmup, k", [(3, 1), (3, 2), (2, 3), (0, 4), (1, 5)])
def test_pulls_happen_every_k_iterations_after_the_warmup(warmup, k):
    c = Cluster(SsdSgd, [3, 2], workers=2, warmup=warmup, k=k)
    iterations = 14
    for it in range(1, iterations + 1):
        for rank in (0, 1):
            c.step(rank, it, [torch.full((3,), 0.1 * rank + 0.01 * it), torch.full((2,), -0.2)])
    expected = list(range(1, warmup + 1)) + [it for it in range(warmup + 1, iterations + 1)
                                             if (it - 1 - warmup) % k == k - 1]
    for rank in (0, 1):
        for key in ("t0", "t1"):
            assert c.pulls(rank, key) == expected
    pushes = [it for s, kind, k_, it in c.log if s == "worker1" and kind == pb.GRADIENT and k_ == "t1"]
    assert pushes == list(range(1, iterations + 1))  # every iteration pushes
    assert c.shard.version("t0") == iterations


def test_after_warmup_the_gate_opens_without_the_server_but_warmup_waits_for_it():
    c = Cluster(SsdSgd, [2], workers=2, warmup=1, k=3)
    c.step(0, 1, [[1.0, 1.0]])
    assert c.fresh == []                  # warm-up: worker0's pull waits for worker1's push
    c.step(1, 1, [[1.0, 1.0]])
    assert sorted(c.fresh) == [(0, 0), (1, 0)]
    c.fresh.clear()
    c.step(0, 2, [[1.0, 1.0]])            # delay stage: worker1 lags, worker0 goes on
    c.step(0, 3, [[1.0, 1.0]])
    assert c.fresh == [(0, 0), (0, 0)] and c.shard.version("t0") == 1


def test_k1_beta0_runs_local_sgd_from_the_pulled_weights():
    """With k=1 every local update restarts from the weights pulled one step before: w' = w_{t-1} - loc_lr*alpha*g."""
    c = Cluster(SsdSgd, [1], warmup=1, k=1, beta=0.0, momentum=0.0)
    live = c.workers[0].ctx.tensors[0]
    c.step(0, 1, [0.5])                    # w1 = 0.95
    c.step(0, 2, [0.25])                   # w' = 0.95 - 0.8*0.25 = 0.75; server w2 = 0.925 pulled
    assert live.item() == pytest.approx(0.75)
    c.step(0, 3, [1.0])                    # w' = 0.925 - 0.8*1.0
    assert live.item() == pytest.approx(0.125)


def test_options_defaults_follow_the_paper_and_refuse_nonsense():
    o = SsdSgdOptions()
    assert (o.alpha, o.beta, o.loc_lr, o.k) == (2.0, 0.5, None, 2)
    c = Cluster(SsdSgd, [1], lr=0.05)
    assert c.workers[0].loc_lr == pytest.approx(0.2)   # 4 x lr (§4.1)
    with pytest.raises(ValueError):
        SsdSgdOptions(k=0)
    with pytest.raises(ValueError):
        SsdSgdOptions(loc_lr=0.0)


def test_asgd_pulls_after_every_push_and_never_waits_for_other_workers():
    c = Cluster(Asgd, [2], workers=2, momentum=0.0)
    c.step(0, 1, [[1.0, 1.0]])
    c.step(0, 2, [[1.0, 1.0]])            # worker1 has not pushed at all
    assert c.fresh == [(0, 0), (0, 0)] and c.pulls(0) == [1, 2]
    assert torch.allclose(c.workers[0].ctx.tensors[0], torch.full((2,), 0.8))   # two steps of lr*g
    c.step(1, 1, [[2.0, 2.0]])            # worker1's gradient lands on the latest weights
    assert torch.allclose(c.workers[1].ctx.tensors[0], torch.full((2,), 0.6))
