"""Stanza's workers in one process over real gRPC streams, against one model trained on the global batch.

Each worker has its own model, Engine (gates, gradient hooks, communication
thread), inbox and NodeTransport, wired the way ``roles/worker.py`` wires
them; only the processes are missing. n_c = 3 CONV workers under n_f = 2 FC
workers exercises the surplus rule, unequal CONV groups and the FC all-reduce.
"""

import threading
import time

import pytest
import torch
from torch import nn

from synclab.compute.engine import Engine
from synclab.strategies.base import WorkerContext
from synclab.strategies.stanza import Stanza, StanzaOptions
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport

TOKEN = "t0ken"
K = 4            # per-CONV-worker batch
CLASSES = 5
LR, MOMENTUM, WD = 0.1, 0.9, 1e-3


class TinyCnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                                      nn.Conv2d(4, 6, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(nn.Linear(6 * 2 * 2, 16), nn.ReLU(), nn.Linear(16, CLASSES))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def new_model() -> TinyCnn:
    torch.manual_seed(0)
    return TinyCnn()


def global_batch(iteration: int, n_c: int):
    gen = torch.Generator().manual_seed(1000 + iteration)
    return torch.randn(n_c * K, 3, 8, 8, generator=gen), torch.randint(0, CLASSES, (n_c * K,), generator=gen)


def reference(iterations: int, n_c: int):
    """``local``: torch.optim.SGD on the mean loss over the global batch of n_c · K samples."""
    model = new_model()
    opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM, weight_decay=WD)
    losses = []
    for it in range(1, iterations + 1):
        x, y = global_batch(it, n_c)
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss.detach()))
    return model, losses


def close_all(nodes) -> None:
    closers = [threading.Thread(target=n.close, args=(0.2,)) for n in nodes]
    for t in closers:
        t.start()
    for t in closers:
        t.join(30)


def run_stanza(world: int, fc_workers: int, iterations: int):
    names = {r: f"worker{r}" for r in range(world)}
    engines = {r: Engine(new_model(), nn.CrossEntropyLoss(), torch.device("cpu")) for r in range(world)}
    plan = Stanza.make_plan(engines[0].infos, ps_shards=0, workers=world, seed=0,
                            options=StanzaOptions(fc_workers=fc_workers))
    inboxes = {r: Inbox() for r in range(world)}
    nodes = {r: NodeTransport(names[r], TOKEN, on_message=inboxes[r].deliver, chunk_bytes=4 << 10)
             for r in range(world)}
    ports = {r: nodes[r].serve("127.0.0.1", 0, peer=True) for r in range(world)}
    strategies = {}
    for r in range(world):
        e = engines[r]
        ctx = WorkerContext(rank=r, world=world, node=names[r], params=e.infos, tensors=e.tensors, lr=LR,
                            momentum=MOMENTUM, weight_decay=WD, seed=0, mark_fresh=e.mark_fresh, inbox=inboxes[r],
                            worker_names=names, plan=plan, batch_size=K)
        strategies[r] = Stanza(ctx)
        e.attach(strategies[r])
    for r, s in strategies.items():
        for peer in sorted(s.peers()):
            s.ctx.peer_links[peer] = nodes[r].connect(names[peer], f"127.0.0.1:{ports[peer]}", "peer")
    timings, errors = {r: [] for r in range(world)}, []

    def train(r):
        s, e = strategies[r], engines[r]
        try:
            shard = s.data_shard()
            for it in range(1, iterations + 1):
                x = y = None
                if shard is not None:
                    data_rank, data_world = shard
                    gx, gy = global_batch(it, data_world)
                    x, y = gx[data_rank * K:(data_rank + 1) * K], gy[data_rank * K:(data_rank + 1) * K]
                timings[r].append(s.run_iteration(e, it, x, y, time.perf_counter()))
            e.wait_fresh()
            s.on_train_end()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append((r, err))
            for inbox in inboxes.values():
                inbox.fail(err)

    threads = [threading.Thread(target=train, args=(r,)) for r in range(world)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
    finally:
        close_all(nodes.values())
        for e in engines.values():
            e.close()
    assert not errors, errors
    assert not any(t.is_alive() for t in threads), "a worker hung"
    return plan, strategies, engines, timings


@pytest.mark.parametrize("world, fc_workers", [(3, 1), (5, 2)])
def test_same_params_as_one_model_on_the_global_batch(world, fc_workers):
    iterations = 3
    plan, strategies, engines, timings = run_stanza(world, fc_workers, iterations)
    n_c = plan.conv_workers
    assert n_c == world - fc_workers
    ref, ref_losses = reference(iterations, n_c)
    # rank 0 (a CONV worker) holds the whole trained model once training ends
    got = engines[0].model.state_dict()
    for k, v in ref.state_dict().items():
        assert torch.allclose(got[k], v, rtol=1e-5, atol=1e-6), k
    # every CONV worker holds the same CONV bits, every FC worker the same FC bits (all-reduce is bit-identical)
    boundary = plan.boundary
    for r in range(world):
        lead = 0 if r < n_c else n_c
        part = range(boundary) if r < n_c else range(boundary, len(engines[r].tensors))
        for i in part:
            assert torch.equal(engines[r].tensors[i], engines[lead].tensors[i]), (r, i)
    # records: CONV workers count their samples and report the loss of their own samples; FC workers count none
    for it in range(iterations):
        conv_losses = [timings[r][it].loss for r in range(n_c)]
        assert sum(conv_losses) / n_c == pytest.approx(ref_losses[it], rel=1e-5)
        assert [timings[r][it].samples for r in range(world)] == [K] * n_c + [0] * fc_workers
        assert all(timings[r][it].compute_s > 0 for r in range(world))
    assert ref_losses[-1] != ref_losses[0]


def test_each_worker_trains_only_its_part():
    plan, strategies, engines, _ = run_stanza(3, 1, 1)
    boundary = plan.boundary
    untouched = new_model()
    init = [p.detach() for p in untouched.parameters()]
    # the FC worker's CONV part never moved; the CONV workers' CONV part did
    assert all(torch.equal(engines[2].tensors[i], init[i]) for i in range(boundary))
    assert not torch.equal(engines[1].tensors[0], init[0])
    # CONV worker 1 is not rank 0: it does not receive the FC parameters at the end
    assert all(torch.equal(engines[1].tensors[i], init[i]) for i in range(boundary, len(init)))
    assert strategies[0].data_shard() == (0, 2) and strategies[1].data_shard() == (1, 2)
    assert strategies[2].data_shard() is None
    assert strategies[0].peers() == {1, 2} and strategies[2].peers() == {0, 1}
