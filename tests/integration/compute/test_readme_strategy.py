"""The compute-changing strategy of docs/how-to/add-a-strategy.md, run as written: two workers in one process over
real gRPC streams train the same parameters as one model with plain SGD on worker 0's batch."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import torch
from torch import nn

from synclab.compute.engine import Engine
from synclab.strategies.base import Strategy, WorkerContext
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport

README = Path(__file__).parents[3] / "docs" / "how-to" / "add-a-strategy.md"
LR = 0.1


def readme_strategy() -> type[Strategy]:
    section = README.read_text().split("### Compute-changing", 1)[1].split("\n### ", 1)[0]
    blocks = re.findall(r"```python\n(.*?)```", section, re.S)
    code = next(b for b in blocks if "def run_iteration" in b)
    scope = {"Strategy": Strategy, "register": lambda cls: cls}  # not registered: the test keeps the registry as is
    exec(compile(code, str(README), "exec"), scope)
    return next(v for v in scope.values() if isinstance(v, type) and issubclass(v, Strategy) and v is not Strategy)


class Tiny(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.features = nn.Sequential(nn.Linear(4, 6), nn.ReLU())
        self.classifier = nn.Sequential(nn.Linear(6, 3))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def batch(iteration: int):
    g = torch.Generator().manual_seed(iteration)
    return torch.randn(5, 4, generator=g), torch.randint(0, 3, (5,), generator=g)


def test_the_readme_split_strategy_trains_like_one_model():
    cls, iterations = readme_strategy(), 3
    names = {0: "worker0", 1: "worker1"}
    engines = {r: Engine(Tiny(), nn.CrossEntropyLoss(), torch.device("cpu")) for r in names}
    inboxes = {r: Inbox() for r in names}
    nodes = {r: NodeTransport(names[r], "t0ken", on_message=inboxes[r].deliver) for r in names}
    ports = {r: nodes[r].serve("127.0.0.1", 0, peer=True) for r in names}
    strategies, errors = {}, []
    for r, e in engines.items():
        ctx = WorkerContext(rank=r, world=2, node=names[r], params=e.infos, tensors=e.tensors, lr=LR, momentum=0.0,
                            weight_decay=0.0, seed=0, mark_fresh=e.mark_fresh, inbox=inboxes[r], worker_names=names,
                            update=e.update)
        strategies[r] = cls(ctx)
        e.attach(strategies[r])
    for r, s in strategies.items():
        for peer in s.peers():
            s.ctx.peer_links[peer] = nodes[r].connect(names[peer], f"127.0.0.1:{ports[peer]}", "peer")

    def train(r):
        try:
            for it in range(1, iterations + 1):
                x, y = batch(it) if strategies[r].data_shard() is not None else (None, None)
                strategies[r].run_iteration(engines[r], it, x, y, 0.0)
            engines[r].wait_fresh()
        except BaseException as err:  # noqa: BLE001 - reported below
            errors.append((r, err))
            for inbox in inboxes.values():
                inbox.fail(err)

    threads = [threading.Thread(target=train, args=(r,)) for r in names]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    finally:
        for n in nodes.values():
            n.close(0.2)
        for e in engines.values():
            e.close()
    assert not errors, errors
    reference = Tiny()
    opt = torch.optim.SGD(reference.parameters(), lr=LR)
    for it in range(1, iterations + 1):
        x, y = batch(it)
        opt.zero_grad()
        nn.functional.cross_entropy(reference(x), y).backward()
        opt.step()
    expected = [p.detach() for p in reference.parameters()]
    n_head = 2  # features.0.weight, features.0.bias on worker 0; the classifier's on worker 1
    for i, p in enumerate(expected):
        torch.testing.assert_close(engines[0 if i < n_head else 1].tensors[i].detach(), p, rtol=1e-5, atol=1e-6)
