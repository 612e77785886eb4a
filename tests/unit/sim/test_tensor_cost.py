"""The all-reduce workers' per-tensor runtime work beside the ring, on the emulator's host (2026-11-26, issue 14)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import simpy
from typer.testing import CliRunner

from synclab.calibrate import tensor_cost
from synclab.cli import app
from synclab.config import load_spec
from synclab.sim.host import HostCpu
from synclab.sim.network import Network
from synclab.sim.run import DEFAULT_TENSOR_S, simulate, tensor_s_for
from synclab.strategies import registry

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=4", "run.warmup=1", "compute.scale=0.01", "network.rate=1gbit"]


def _done_at(host):
    env = simpy.Environment()
    net = Network(env, random.Random(0), host)
    done = []
    net.tensor_job(lambda: done.append(env.now))
    env.run()
    return done


def test_a_tensor_job_is_host_time_over_dilation_and_shares_the_cores():
    # 1 ms of the host at D = 2: 0.5 ms emulated; 4 mirrored ranks on 2 cores: twice that
    assert _done_at(HostCpu(2, 2e-9, dilation=2, tensor_s=1e-3)) == [pytest.approx(0.0005)]
    assert _done_at(HostCpu(2, 2e-9, dilation=2, mirrored=4, tensor_s=1e-3)) == [pytest.approx(0.001)]
    assert _done_at(HostCpu(2, 2e-9, tensor_s=0.0)) == [0.0]
    assert _done_at(None) == [0.0]
    assert HostCpu(2, 2e-9, tensor_s=1e-4).as_dict()["tensor_s"] == 1e-4


def test_a_negative_or_nan_tensor_cost_is_refused():
    for bad in (-1e-6, float("nan")):
        with pytest.raises(ValueError, match="per tensor"):
            HostCpu(2, 2e-9, tensor_s=bad)


def _mean(r):
    rows = [x for x in r.rows if x["iteration"] > 1]
    return sum(x["iteration_s"] for x in rows) / len(rows)


def test_wfbp_pays_one_job_per_tensor_on_its_communication_thread():
    # 10 ms of host per tensor, D = 1, 2 ranks on 2 cores (each job at full speed): the comm thread is the
    # bottleneck, so every iteration grows by n_tensors x 10 ms; without the host modelled nothing changes
    spec = load_spec(QUICKSTART, [*BASE, "strategy.name=wfbp", "cluster.workers=2"])
    with_cost = simulate(spec, host_cores=2, tensor_s=0.010)
    without = simulate(spec, host_cores=2, tensor_s=0.0)
    n = len(spec_tensors(spec))
    assert _mean(with_cost) - _mean(without) == pytest.approx(n * 0.010, rel=0.02)
    assert _mean(simulate(spec, tensor_s=0.010)) == pytest.approx(_mean(simulate(spec, tensor_s=0.0)))
    assert with_cost.host_cpu["tensor_s"] == 0.010


def spec_tensors(spec):
    import torch

    from synclab.core import param_layout
    from synclab.models import build_model

    with torch.device("meta"):
        infos, _, _ = param_layout(build_model(spec.model.name, **spec.model.options))
    return infos


def test_the_default_is_the_measured_value_of_the_path_and_charged_by_default():
    for v in DEFAULT_TENSOR_S.values():
        assert 50e-6 <= v <= 500e-6  # synclab calibrate tensor-cost on the 2-core VM
    model = {name: registry.get(name).sim_model for name in ("wfbp", "mgwfbp", "synceasgd", "ps", "p3")}
    assert tensor_s_for(model["wfbp"]) == DEFAULT_TENSOR_S["per-tensor"]
    assert tensor_s_for(model["mgwfbp"]) == tensor_s_for(model["synceasgd"]) == DEFAULT_TENSOR_S["grouped"]
    assert tensor_s_for(model["ps"]) == tensor_s_for(model["p3"]) == 0.0
    assert simulate(load_spec(QUICKSTART, [*BASE, "strategy.name=mgwfbp-opt", "strategy.profile_iterations=1",
                                           "cluster.workers=2"]), host_cores=2).host_cpu["tensor_s"] == \
        DEFAULT_TENSOR_S["grouped"]
    spec = load_spec(QUICKSTART, [*BASE, "strategy.name=synceasgd", "cluster.workers=4"])
    assert _mean(simulate(spec, host_cores=2)) > _mean(simulate(spec, host_cores=2, tensor_s=0.0))


def test_cli_tensor_cost_needs_host_cores_and_a_number(tmp_path):
    res = CliRunner().invoke(app, ["simulate", str(QUICKSTART), "--out", str(tmp_path / "r"),
                                   "--tensor-us", "100", "--set", "compute.mode=replay"])
    assert res.exit_code == 2 and "--host-cpu" in res.output
    res = CliRunner().invoke(app, ["simulate", str(QUICKSTART), "--out", str(tmp_path / "r"), "--host-cpu", "2",
                                   "--tensor-us", "-1", "--set", "compute.mode=replay"])
    assert res.exit_code == 2 and ">= 0" in res.output


def test_the_measurement_script_times_the_real_path():
    m = tensor_cost
    for strategy in ("wfbp", "synceasgd"):
        r = m.measure("smallcnn", 32, 0.01, 2.0, 3, strategy)
        assert r["tensors"] > 0 and r["strategy"] == strategy and r["dilation"] == 2.0
        assert 0 < r["wall_s_per_tensor_mean"] < 0.05 and r["cpu_s_per_tensor_mean"] > 0
