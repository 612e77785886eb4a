"""Real local clusters: SyncEASGD, MG-WFBP (both plans) DDP buckets, Horovod fusion and ByteScheduler's credit change when bytes move,
never the math."""

import csv
import json

import pytest
import torch

from support.cluster import FAST, run_spec, summary

pytestmark = pytest.mark.slow

ITERATIONS = 8
STRATEGIES = ["synceasgd", "mgwfbp", "mgwfbp-opt", "ddp", "horovod", "bytescheduler"]
# small caps, so the MLP gradients fall into several DDP buckets, Horovod fusion buffers and ByteScheduler
# partitions (and the credit holds a few partitions: they run concurrently and in rank 0's order)
EXTRA = {"ddp": ["strategy.bucket_cap_mb=0.05", "strategy.first_bucket_mb=0.01"],
         "horovod": ["strategy.fusion_threshold_mb=0.05", "strategy.cycle_time_ms=2"],
         "bytescheduler": ["strategy.partition_bytes=20000", "strategy.credit_bytes=50000"]}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("allreduce")
    out = {}
    for strategy in ["local", *STRATEGIES]:
        out[strategy] = base / strategy
        # 3 profiled (WFBP) iterations, then 5 with the merge plan
        r = run_spec(out[strategy], *FAST, f"strategy.name={strategy}", f"run.iterations={ITERATIONS}",
                     "run.check_params=true", "cluster.workers=2",
                     *(["strategy.profile_iterations=3", "strategy.fit_repeats=3"] if "mgwfbp" in strategy else []),
                     *EXTRA.get(strategy, []))
        assert r.returncode == 0, f"{strategy} failed:\n{r.stdout}\n{r.stderr}"
    return out


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_same_final_params_as_local(runs, strategy):
    ref = torch.load(runs["local"] / "params.pt")
    got = torch.load(runs[strategy] / "params.pt")
    assert ref.keys() == got.keys()
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), f"{strategy}: {k} differs"
    s = summary(runs[strategy])
    assert s["strategy"] == strategy and s["workers"] == 2
    assert s["final_loss"] != s["initial_loss"]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_workers_hold_identical_params_after_every_step(runs, strategy):
    by_it = {}
    for row in csv.DictReader((runs[strategy] / "iterations.csv").open()):
        by_it.setdefault(int(row["iteration"]), set()).add(row["params_checksum"])
    assert sorted(by_it) == list(range(1, ITERATIONS + 1))
    assert all(len(v) == 1 and "" not in v for v in by_it.values()), by_it


@pytest.mark.parametrize("strategy, algorithm", [("mgwfbp", "paper"), ("mgwfbp-opt", "optimal")])
def test_plan_json_records_the_measured_plan(runs, strategy, algorithm):
    record = json.loads((runs[strategy] / "plan.json").read_text())
    names = list(torch.load(runs[strategy] / "params.pt"))
    assert record["status"] == "planned" and record["algorithm"] == algorithm
    assert record["a"] >= 0 and record["b"] > 0 and record["t_f"] > 0
    fit = record["cost_fit"]  # the live fit of T(M) = a + b*M: its coefficients, R² and residuals per size
    assert (fit["a"], fit["b"]) == (record["a"], record["b"]) and fit["r2"] <= 1
    assert len(fit["sizes"]) == len(fit["median_seconds"]) == len(fit["residuals"]) >= 2
    assert [t["name"] for t in record["tensors"]] == names
    assert all(t["t_b"] >= 0 for t in record["tensors"]) and sum(t["t_b"] for t in record["tensors"]) > 0
    assert [i for g in record["groups"] for i in g] == list(range(len(names) - 1, -1, -1))
    assert record["merged"] == [i != g[-1] for i in range(len(names)) for g in record["groups"] if i in g]
    times = record["predicted_iteration_seconds"]
    assert times["mgwfbp-opt"] <= min(times["wfbp"], times["synceasgd"], times["mgwfbp"]) + 1e-12


def test_synceasgd_sends_every_tensor_after_the_last_gradient(runs):
    rows = [r for r in csv.DictReader((runs["synceasgd"] / "events.csv").open()) if r["node"] == "worker0"]
    for it in range(2, ITERATIONS + 1):
        mine = [r for r in rows if int(r["iteration"]) == it]
        last_grad = max(float(r["time_s"]) for r in mine if r["event"] == "grad_ready")
        first_send = min(float(r["time_s"]) for r in mine if r["event"] == "send_start")
        assert first_send >= last_grad
