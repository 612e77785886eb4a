"""A strategy's own simulator model (``OwnModel``), written against :class:`synclab.sim.api.ModelApi` outside the
simulator, gives the stock model's numbers when it does the same thing: a whole-model all-reduce after backward,
then the updates (SyncEASGD, MG-WFBP §2.4)."""

from __future__ import annotations

from pathlib import Path

import pytest

from synclab.config import load_spec
from synclab.sim.run import UnsupportedStrategy, simulate
from synclab.strategies import registry

QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=5", "run.warmup=1", "compute.scale=0.01", "cluster.workers=4",
        "run.events=false"]

OWN = '''
from synclab.strategies.registry import register
from synclab.strategies.simmodel import OwnModel
from synclab.strategies.synceasgd import SyncEasgd


class OneGroup:
    def __init__(self, api):
        self.api = api

    def on_gradient(self, iteration, index):
        pass

    def on_backward_end(self, iteration):
        n = len(self.api.numels)
        self.api.submit(lambda done: self.api.allreduce(
            sum(self.api.numels), lambda: self.api.update(iteration, range(n - 1, -1, -1), done)))


@register
class OwnSyncEasgd(SyncEasgd):
    name = "own-synceasgd-test"
    sim_model = OwnModel(factory=OneGroup, per_tensor_host="grouped")
'''


@pytest.fixture
def own(tmp_path, monkeypatch):
    registry.names()
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    f = tmp_path / "own.py"
    f.write_text(OWN)
    return str(f)


@pytest.mark.parametrize("host", [None, 2.0])
def test_an_own_model_matches_the_stock_model_doing_the_same(own, host):
    stock = simulate(load_spec(QUICKSTART, [*BASE, "strategy.name=synceasgd"]), host_cores=host)
    mine = simulate(load_spec(QUICKSTART, [*BASE, "strategy.name=own-synceasgd-test", f"strategy.module={own}"]),
                    host_cores=host)
    keys = ("iteration", "rank", "iteration_s", "compute_s", "comm_wait_s", "bytes_sent", "bytes_received")
    assert [tuple(r[k] for k in keys) for r in mine.rows] == [tuple(r[k] for k in keys) for r in stock.rows]
    assert mine.bytes_sent == stock.bytes_sent and mine.world == stock.world == 4


def test_an_unmirrored_own_model_cannot_all_reduce(own, tmp_path):
    f = tmp_path / "unmirrored.py"
    f.write_text(OWN.replace('per_tensor_host="grouped"', "mirror=False").replace("own-synceasgd-test", "unmirrored"))
    with pytest.raises(RuntimeError, match="mirror=True"):
        simulate(load_spec(QUICKSTART, [*BASE, "strategy.name=unmirrored", f"strategy.module={f}"]))


def test_a_strategy_without_a_model_is_refused_saying_where_one_goes(monkeypatch):
    monkeypatch.setattr(registry.get("wfbp"), "sim_model", None)
    with pytest.raises(UnsupportedStrategy, match="'wfbp' has no simulator model.*sim_model.*OwnModel"):
        simulate(load_spec(QUICKSTART, [*BASE, "strategy.name=wfbp"]))
