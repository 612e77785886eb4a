"""Real local clusters for the parameter-server strategies: ``ps`` in both protocols, P3 and slicing alone,
SSD-SGD, ASGD.

``ps`` (``kvstore`` and ``push-then-pull``) and P3 change when bytes move, never the math (same parameters
as ``local``), and
its ordering shows in ``events.csv``. SSD-SGD pulls exactly every k iterations
after its warm-up, tracks synchronous SGD closely with k=1 and beta=0, and
trains for k = 1..5; ASGD trains.
"""

import csv
from collections import defaultdict

import pytest
import torch

from support.cluster import FAST, run_spec, summary

pytestmark = pytest.mark.slow

CLUSTER = ["cluster.workers=2", "cluster.ps_shards=2"]


def run_ok(out, *overrides):
    r = run_spec(out, *FAST, *CLUSTER, *overrides)
    assert r.returncode == 0, f"{overrides} failed:\n{r.stdout}\n{r.stderr}"
    return out


def mean_loss_by_iteration(out) -> list[float]:
    by_it = defaultdict(list)
    for row in csv.DictReader((out / "iterations.csv").open()):
        by_it[int(row["iteration"])].append(float(row["loss"]))
    return [sum(v) / len(v) for _, v in sorted(by_it.items())]


def model_bytes(out) -> int:
    return sum(t.numel() * 4 for t in torch.load(out / "params.pt").values())


# -- P3 and ps in both protocols: same math as local --------------------------------------------------
P3_STRATEGIES = ["p3", "p3-slicing"]
PS_PROTOCOLS = ["ps-kvstore", "ps-push-then-pull"]
# a small slice so every tensor of the MLP is cut into several slices over both shards
EQUIV = {"local": ["strategy.name=local"],
         **{s: [f"strategy.name={s}", "strategy.slice_params=20000"] for s in P3_STRATEGIES},
         **{s: ["strategy.name=ps", f"strategy.protocol={s.removeprefix('ps-')}"] for s in PS_PROTOCOLS}}


@pytest.fixture(scope="module")
def equivalence(tmp_path_factory):
    base = tmp_path_factory.mktemp("p3-equiv")
    return {name: run_ok(base / name, *overrides, "run.check_params=true") for name, overrides in EQUIV.items()}


@pytest.mark.parametrize("strategy", P3_STRATEGIES + PS_PROTOCOLS)
def test_p3_and_ps_end_with_the_same_params_as_local(equivalence, strategy):
    ref = torch.load(equivalence["local"] / "params.pt")
    got = torch.load(equivalence[strategy] / "params.pt")
    assert ref.keys() == got.keys()
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), f"{strategy}: {k} differs"
    s = summary(equivalence[strategy])
    assert s["strategy"] == EQUIV[strategy][0].split("=")[1] and s["ps_shards"] == 2
    assert s["final_loss"] != s["initial_loss"]


@pytest.mark.parametrize("strategy", P3_STRATEGIES + PS_PROTOCOLS)
def test_p3_workers_hold_identical_params_after_every_step(equivalence, strategy):
    by_it = defaultdict(set)
    for row in csv.DictReader((equivalence[strategy] / "iterations.csv").open()):
        by_it[int(row["iteration"])].add(row["params_checksum"])
    assert sorted(by_it) == list(range(1, 7))
    assert all(len(v) == 1 and "" not in v for v in by_it.values()), by_it


# -- P3 ordering on a shaped link -----------------------------------------------------------------
# The last layer (128 x 2000) is 8x the first (256 x 128), so backward hands it over first and it is
# still on the wire when the first layer's gradient arrives. 64 KiB chunks keep the token bucket's
# burst (one chunk + 64 KiB) small next to the 2.3 MB each PS sends per iteration. One shard, so
# the baseline's FIFO order is not blurred by two streams sharing the bucket.
SHAPED = ["model.name=mlp", "model.options={hidden: [128], num_classes: 2000}", "network.rate=50mbit",
          "transport.chunk_bytes=65536", "cluster.ps_shards=1", "run.iterations=6"]


@pytest.fixture(scope="module")
def shaped(tmp_path_factory):
    base = tmp_path_factory.mktemp("p3-shaped")
    out = {}
    for strategy in ("p3", "ps"):
        out[strategy] = base / strategy
        r = run_spec(out[strategy], *FAST, "cluster.workers=2", *SHAPED, f"strategy.name={strategy}")
        assert r.returncode == 0, f"{strategy} failed:\n{r.stdout}\n{r.stderr}"
    return out


def layer_fresh_times(out) -> dict[tuple[str, int], dict[str, float]]:
    """(node, iteration) -> layer -> time its last tensor became fresh."""
    done: dict = defaultdict(dict)
    for row in csv.DictReader((out / "events.csv").open()):
        if row["event"] == "params_fresh":
            layer = row["tensor"].rsplit(".", 1)[0]
            key = (row["node"], int(row["iteration"]))
            done[key][layer] = max(done[key].get(layer, 0.0), float(row["time_s"]))
    return done


def test_p3_first_layer_params_arrive_before_the_last_layers_and_ps_the_reverse(shaped):
    p3, ps = layer_fresh_times(shaped["p3"]), layer_fresh_times(shaped["ps"])
    assert len(p3) == len(ps) == 2 * 6
    p3_order = {k: v["layers.0"] < v["layers.2"] for k, v in p3.items()}
    ps_order = {k: v["layers.2"] < v["layers.0"] for k, v in ps.items()}
    assert all(p3_order.values()), p3_order
    assert all(ps_order.values()), ps_order


# -- SSD-SGD --------------------------------------------------------------------------------------
SSD = ["optimizer.lr=0.02", "run.iterations=24", "strategy.name=ssdsgd", "strategy.warmup=8"]


def expected_pulls(iterations: int, warmup: int, k: int) -> int:
    """One per warm-up iteration, then one every k-th iteration of the delay stage."""
    return warmup + (iterations - warmup) // k


def assert_pulls_every_k_and_loss_falls(out, k):
    s = summary(out)
    pulls = expected_pulls(24, 8, k)
    # every pull fetches the whole model; workers receive nothing else from a shard in pull mode
    assert s["bytes_received"]["worker0"] == s["bytes_received"]["worker1"] == pulls * model_bytes(out)
    losses = mean_loss_by_iteration(out)
    assert sum(losses[-3:]) < 0.75 * sum(losses[:3]), losses
    return losses


@pytest.mark.parametrize("k", [2, 3, 4, 5])   # k = 1 runs below, with beta = 0
def test_ssdsgd_pulls_every_k_iterations_and_trains(tmp_path, k):
    assert_pulls_every_k_and_loss_falls(run_ok(tmp_path, *SSD, f"strategy.k={k}"), k)


def test_ssdsgd_k1_beta0_tracks_synchronous_sgd(tmp_path):
    ref = mean_loss_by_iteration(run_ok(tmp_path / "local", "optimizer.lr=0.02", "run.iterations=24",
                                        "strategy.name=local"))
    ssd = assert_pulls_every_k_and_loss_falls(run_ok(tmp_path / "ssd", *SSD, "strategy.k=1", "strategy.beta=0"), 1)
    assert ssd[:8] == pytest.approx(ref[:8], rel=1e-4)           # warm-up: synchronous SGD itself
    gaps = [abs(a - b) for a, b in zip(ssd, ref)]
    assert max(gaps) < 0.15, gaps                                 # 1-step delay, compensated locally


# -- ASGD -----------------------------------------------------------------------------------------
def test_asgd_trains_and_pulls_after_every_push(tmp_path):
    out = run_ok(tmp_path, "optimizer.lr=0.02", "run.iterations=24", "strategy.name=asgd")
    s = summary(out)
    assert s["bytes_received"]["worker0"] == s["bytes_received"]["worker1"] == 24 * model_bytes(out)
    losses = mean_loss_by_iteration(out)
    assert sum(losses[-3:]) < 0.75 * sum(losses[:3]), losses
