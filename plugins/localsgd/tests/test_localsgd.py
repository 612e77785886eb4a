"""Tests of the local-SGD plugin: its schedule, its registration, its simulator model, and real runs.

The real runs launch a local SyncLab cluster (processes, gRPC streams on loopback): with H = 1 local SGD is
synchronous SGD and must end with ``local``'s parameters; with H > 1 the workers agree exactly at the
averaging iterations and only there.
"""

from __future__ import annotations

import csv
import math
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest
import torch
from synclab_localsgd import LocalSgd, averages

from synclab.config import SpecError, load_spec
from synclab.resources import examples_dir
from synclab.strategies import registry

QUICKSTART = examples_dir() / "quickstart.yaml"  # the quick start SyncLab ships
FAST = ["model.name=mlp", "model.batch_size=16", "network.rate=null", "run.warmup=1", "cluster.workers=2"]


def test_the_schedule_averages_at_multiples_of_the_period():
    assert [t for t in range(1, 13) if averages(t, 4)] == [4, 8, 12]
    assert all(averages(t, 1) for t in range(1, 5))


def test_it_is_found_through_its_entry_point():
    assert "localsgd" in {ep.name for ep in entry_points(group="synclab.strategies")}
    assert registry.get("localsgd") is LocalSgd
    assert registry.origin("localsgd").startswith("entry point localsgd")


def test_its_options_are_validated():
    spec = load_spec(QUICKSTART, ["strategy.name=localsgd", "strategy.period=3"])
    assert spec.strategy.options.period == 3
    with pytest.raises(SpecError, match="period"):
        load_spec(QUICKSTART, ["strategy.name=localsgd", "strategy.period=0"])
    with pytest.raises(SpecError, match="perido"):
        load_spec(QUICKSTART, ["strategy.name=localsgd", "strategy.perido=3"])


@pytest.mark.parametrize("period", [1, 4])
def test_the_simulator_moves_one_model_all_reduce_per_period(period):
    from synclab.sim.run import simulate

    iterations, workers = 12, 3
    spec = load_spec(QUICKSTART, ["strategy.name=localsgd", f"strategy.period={period}", f"run.iterations={iterations}",
                                  f"cluster.workers={workers}", "run.events=false"])
    r = simulate(spec)
    numel = sum(p.numel() for p in _model(spec).parameters())
    ring_bytes = 2 * (workers - 1) * math.ceil(numel / workers) * 4  # 2(N-1) steps of ceil(M/N) floats
    assert r.bytes_sent == {f"worker{k}": iterations // period * ring_bytes for k in range(workers)}
    assert len(r.rows) == iterations * workers


def test_fewer_averagings_never_slow_the_simulated_run():
    from synclab.sim.run import simulate

    def mean(period):
        spec = load_spec(QUICKSTART, ["strategy.name=localsgd", f"strategy.period={period}", "run.iterations=12",
                                      "run.events=false"])
        rows = simulate(spec).rows
        return sum(r["iteration_s"] for r in rows) / len(rows)

    assert mean(4) < mean(1)


def _model(spec):
    from synclab.models import build_model

    return build_model(spec.model.name, **spec.model.options)


def _run(out: Path, *overrides: str) -> Path:
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(out), "--no-report"]
    for o in [*FAST, *overrides]:
        args += ["--set", o]
    r = subprocess.run(args, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-4000:]
    return out


def _checksums(run: Path) -> dict[int, set[str]]:
    by_it: dict[int, set[str]] = {}
    for row in csv.DictReader((run / "iterations.csv").open()):
        by_it.setdefault(int(row["iteration"]), set()).add(row["params_checksum"])
    return by_it


def test_with_period_1_it_ends_with_locals_parameters(tmp_path):
    ref = torch.load(_run(tmp_path / "local", "strategy.name=local", "run.iterations=6") / "params.pt")
    run = _run(tmp_path / "localsgd", "strategy.name=localsgd", "strategy.period=1", "run.iterations=6",
               "run.check_params=true")
    got = torch.load(run / "params.pt")
    assert ref.keys() == got.keys()
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), k
    assert all(len(v) == 1 for v in _checksums(run).values())


def test_with_period_3_workers_agree_only_at_the_averagings(tmp_path):
    run = _run(tmp_path / "localsgd3", "strategy.name=localsgd", "strategy.period=3", "run.iterations=7",
               "run.check_params=true")
    agree = {it for it, sums in _checksums(run).items() if len(sums) == 1}
    assert agree == {3, 6}
