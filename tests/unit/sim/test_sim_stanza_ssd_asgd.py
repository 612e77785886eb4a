"""The simulator's ``stanza``, ``ssdsgd`` and ``asgd``: determinism, hand-checked tiny cases, the behaviour
each strategy is about (ASGD workers do not wait for each other, SSD-SGD's local iterations skip the
servers, Stanza's roles), and records ``synclab report`` reads."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from synclab.config import load_spec
from synclab.report import load_run
from synclab.sim.records import write_run
from synclab.sim.run import PAYLOAD_SHARE, Simulation, prepare, simulate

REPO = Path(__file__).resolve().parents[3]
QUICKSTART = REPO / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=4", "run.warmup=1", "compute.scale=0.01"]
A = 0.001   # start-up cost per message in the hand-checked cases
RATE = 1e9 * PAYLOAD_SHARE  # 1gbit, egress of every node; the payload share of the wire rate


def _spec(*overrides):
    return load_spec(QUICKSTART, [*BASE, *overrides])


def _write_profile(tmp_path: Path, model: str, times: dict[str, tuple[float, float]], update: float | None,
                   base: dict) -> Path:
    """A profile with ``times[name] = (forward_s, backward_s)`` per tensor (absent: 0) and ``update`` seconds."""
    data = dict(base)
    data["tensors"] = [{**t, "forward_seconds": times.get(t["name"], (0.0, 0.0))[0],
                        "backward_seconds": times.get(t["name"], (0.0, 0.0))[1]} for t in base["tensors"]]
    data["forward_seconds"] = sum(t["forward_seconds"] for t in data["tensors"])
    data["backward_seconds"] = sum(t["backward_seconds"] for t in data["tensors"])
    data["update_seconds"] = update
    data.pop("spread", None)
    path = tmp_path / f"{model}.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.parametrize("strategy,extra", [("stanza", ["cluster.workers=4", "strategy.fc_workers=1"]),
                                            ("ssdsgd", ["strategy.warmup=1", "strategy.k=2"]),
                                            ("asgd", ["cluster.workers=3"])])
def test_same_seed_same_records(strategy, extra):
    spec = _spec("network.rate=null", "network.profile={rate: 1gbit, delay: 1ms, jitter: 0.5ms, direction: both}",
                 f"strategy.name={strategy}", *extra)
    a, b = simulate(spec), simulate(spec)
    assert repr(a.rows) == repr(b.rows) and a.events == b.events and a.sim_events == b.sim_events
    assert len(a.rows) == 4 * a.world


# -- ASGD --------------------------------------------------------------------------------------------------

def _mlp_asgd(tmp_path, strategy="asgd", workers=2):
    """mlp with no hidden layer: one layer, weight (10 x 25000 = 1 MB) and bias (40 B), one PS shard.
    Forward 10 ms, backward 5 ms per tensor, no update time."""
    model = ["model.name=mlp", "model.options={hidden: [], input_dim: 25000, num_classes: 10}"]
    base = json.loads((REPO / "profiles" / "mlp-b32-cpu.json").read_text())
    base["tensors"] = [{"name": "layers.0.weight", "params": 250000, "kind": "fc"},
                       {"name": "layers.0.bias", "params": 10, "kind": "fc"}]
    base["options"] = {"hidden": [], "input_dim": 25000, "num_classes": 10}
    profile = _write_profile(tmp_path, "mlp", {"layers.0.weight": (0.01, 0.005), "layers.0.bias": (0.0, 0.005)},
                             None, base)
    return _spec(*model, f"compute.profile={profile}", "compute.scale=1", "cluster.ps_shards=1",
                 f"cluster.workers={workers}", f"strategy.name={strategy}", "network.rate=1gbit",
                 "run.iterations=5")


def _alone(spec, late_rank: int, late_s: float):
    """Simulate with worker ``late_rank`` starting ``late_s`` after the others."""
    spec, _ = prepare(spec)
    sim = Simulation(spec, startup_s=A)
    late = sim.workers[late_rank]
    run = late.run

    def delayed():
        yield sim.env.timeout(late_s)
        yield from run()

    late.run = delayed
    return sim.run()


def test_asgd_worker_alone_hand_checked(tmp_path):
    """Worker 0 alone (worker 1 starts 100 s later): bias ready at 15 ms, pushed (a) and pulled (a, a back);
    weight ready at 20 ms: push a + 8 ms, pull request a, reply a + 8 ms → the layer is fresh at 39 ms
    (the bias's round trip is over by then)."""
    r = _alone(_mlp_asgd(tmp_path), late_rank=1, late_s=100.0)
    w0 = [row for row in r.rows if row["rank"] == 0]
    expected = 0.015 + 0.005 + 3 * A + 2 * 1_000_000 * 8 / RATE
    assert w0[0]["iteration_s"] == pytest.approx(0.02)  # the first forward waits for nothing
    for row in w0[1:]:  # every later forward waits for the previous iteration's round trip
        assert row["iteration_s"] == pytest.approx(expected, abs=2e-6)
    assert w0[-1]["start_s"] < 1.0  # all of worker 0's iterations ran before worker 1 started


def test_asgd_workers_do_not_wait_for_each_other_but_ps_workers_do(tmp_path):
    asgd = _alone(_mlp_asgd(tmp_path), late_rank=1, late_s=2.0)
    ps = _alone(_mlp_asgd(tmp_path, strategy="ps"), late_rank=1, late_s=2.0)
    first = [row for row in asgd.rows if row["rank"] == 0]
    assert max(row["iteration_s"] for row in first) < 0.05
    assert max(row["iteration_s"] for row in ps.rows if row["rank"] == 0) > 1.9  # waits for worker 1's push


def test_asgd_shard_applies_every_push(tmp_path):
    """Each push moves the shard once: W × as many updates as ``ps``, and each worker gets its own reply."""
    r = simulate(_spec("strategy.name=asgd", "cluster.workers=3"), record_events=True)
    fresh = [e for e in r.events if e[3] == "params_fresh"]
    assert len(fresh) == 3 * 4 * len(r.spec.compute.model_profile().tensors)


# -- SSD-SGD -----------------------------------------------------------------------------------------------

def test_ssdsgd_warmup_iterations_slower_than_local_ones():
    """smallcnn (10 MB of gradients at 1gbit: 84 ms a way) at compute.scale 1 (0.15 s): warm-up iterations
    wait for push + aggregate + pull; local ones that do not pull compute at their own pace."""
    r = simulate(_spec("strategy.name=ssdsgd", "strategy.warmup=3", "strategy.k=2", "run.iterations=8",
                       "compute.scale=1", "network.rate=1gbit"))
    w0 = {row["iteration"]: row for row in r.rows if row["rank"] == 0}
    warm = [w0[i]["iteration_s"] for i in (1, 2, 3)]
    local_no_pull = [w0[i]["iteration_s"] for i in (5, 7)]  # d = it-1-3: pulls at d % 2 == 1, i.e. it 5, 7
    compute = w0[5]["compute_s"]
    assert min(warm[1:]) > compute + 0.05  # the round trip to the servers is in every warm-up iteration
    assert max(local_no_pull) < min(warm[1:])
    assert w0[4]["comm_wait_s"] > 0.05  # the first local iteration's forward waits for the last warm-up pull
    assert w0[5]["comm_wait_s"] == pytest.approx(0.0, abs=1e-3)  # gates opened by the local update alone


def test_ssdsgd_pulls_only_every_k_iterations():
    r = simulate(_spec("strategy.name=ssdsgd", "strategy.warmup=2", "strategy.k=3", "run.iterations=9",
                       "cluster.workers=2"))
    model_bytes = sum(r.spec.compute.model_profile().params for _ in [0]) * 4
    # warm-up iterations 1, 2 pull; then d = it - 1 - 2 and a pull at d % 3 == 2: iterations 5 and 8
    assert r.bytes_received["worker0"] == 4 * model_bytes
    assert r.bytes_sent["worker0"] == 9 * model_bytes  # a push every iteration


def test_ssdsgd_send_queue_backpressure_holds_the_comm_thread():
    """A tiny transport.queue_bytes makes pushes wait for the link: local iterations get slower."""
    fast = simulate(_spec("strategy.name=ssdsgd", "strategy.warmup=1", "run.iterations=6", "model.name=resnet50",
                          "network.rate=1gbit"))
    held = simulate(_spec("strategy.name=ssdsgd", "strategy.warmup=1", "run.iterations=6", "model.name=resnet50",
                          "network.rate=1gbit", "transport.queue_bytes=1MiB"))
    mean = lambda r: sum(row["iteration_s"] for row in r.rows if row["iteration"] in (3, 4)) / 4  # noqa: E731
    assert mean(held) > mean(fast) * 1.5


# -- Stanza ------------------------------------------------------------------------------------------------

def test_stanza_two_workers_hand_checked(tmp_path):
    """n_c = n_f = 1 on smallcnn: head forward 10 ms, activations (32 × 4096 × 4 B) and labels (32 × 8 B)
    to the FC worker, its forward 2 ms + backward 3 ms, activation gradients back, head backward 4 ms,
    SGD of the head tensors (their share of 1 ms); no all-reduce (groups of one)."""
    base = json.loads((REPO / "profiles" / "smallcnn-b32-cpu.json").read_text())
    profile = _write_profile(tmp_path, "smallcnn", {"features.0.weight": (0.010, 0.004),
                                                    "classifier.0.weight": (0.002, 0.003)}, 0.001, base)
    spec = _spec("strategy.name=stanza", "strategy.fc_workers=1", "cluster.workers=2", f"compute.profile={profile}",
                 "compute.scale=1", "network.rate=1gbit", "run.iterations=4")
    r = simulate(spec, startup_s=A)
    act = 32 * 4096 * 4
    first_layer = sum(t["params"] for t in base["tensors"] if t["name"].startswith("features.0."))
    update_head = 0.001 * first_layer / sum(t["params"] for t in base["tensors"])  # the first gate opens after
    # features.0's SGD steps (the rest run under its forward)
    expected = (0.010 + A + act * 8 / RATE + A + 32 * 8 * 8 / RATE + 0.002 + 0.003 + A + act * 8 / RATE + 0.004
                + update_head)
    conv = [row for row in r.rows if row["rank"] == 0]
    fc = [row for row in r.rows if row["rank"] == 1]
    for row in conv[1:]:
        assert row["iteration_s"] == pytest.approx(expected, rel=1e-6)
        assert row["compute_s"] == pytest.approx(0.014, rel=1e-6)
    assert all(row["samples"] == 0 for row in fc) and all(row["samples"] == 32 for row in conv)
    assert r.bytes_sent["worker0"] == 4 * (act + 32 * 8)


def test_stanza_conv_allreduce_rounds_follow_the_schedule():
    """5 workers, n_f = 2: 3 CONV workers → recursive doubling in floor(log2 3) + 2 = 3 rounds of P_c values;
    2 FC workers → one round of P_f values each way."""
    r = simulate(_spec("strategy.name=stanza", "strategy.fc_workers=2", "cluster.workers=5", "run.iterations=2"))
    prof = r.spec.compute.model_profile()
    p_c = prof.boundary.conv_params * 4
    p_f = prof.boundary.fc_params * 4
    act = 32 * prof.boundary.activations_per_sample * 4 + 32 * 8
    # per iteration: worker0 (position 0) receives from 2, exchanges with 1, sends back to 2: sends 2 × P_c
    assert r.bytes_sent["worker0"] == 2 * (2 * p_c + act)
    assert r.bytes_sent["worker2"] == 2 * (p_c + act)   # the surplus rank: hands in, gets the sum back
    fc_sent = 32 * prof.boundary.activations_per_sample * 4 + 4
    assert r.bytes_sent["worker3"] == 2 * (p_f + 2 * fc_sent)  # serves CONV 0, 1; one FC all-reduce round
    assert r.bytes_sent["worker4"] == 2 * (p_f + fc_sent)      # serves CONV 2


def test_records_of_every_new_strategy_are_readable(tmp_path):
    for name, extra in (("stanza", ["strategy.fc_workers=1"]), ("ssdsgd", []), ("asgd", [])):
        out = tmp_path / name
        summary = write_run(simulate(_spec(f"strategy.name={name}", "run.events=true", *extra)), out)
        run = load_run(out)
        assert run.summary["simulated"] is True and summary["strategy"] == name
        assert (out / "events.csv").is_file() and (out / "timeline.json").is_file()


# -- the PS shards' host CPU (opt-in) ----------------------------------------------------------------------

def test_shard_cpu_is_charged_per_value_on_the_shard(tmp_path):
    """ASGD worker alone (as above) with 1 µs per value of update and 1 µs of reply: the weight's round trip
    gains 250000 × 2 µs = 0.5 s on the shard; off by default."""
    from synclab.sim.strategies import ShardCpu

    spec, _ = prepare(_mlp_asgd(tmp_path))
    sim = Simulation(spec, startup_s=A, shard_cpu=ShardCpu(0.0, 1e-6, 1e-6))
    late = sim.workers[1]
    run = late.run

    def delayed():
        yield sim.env.timeout(100.0)
        yield from run()

    late.run = delayed
    rows = [row for row in sim.run().rows if row["rank"] == 0]
    # push a + 8 ms lands at 29 ms; the update runs 0.25 s while the pull request (a) arrives; the reply's
    # copy 0.25 s, then a + 8 ms on the wire
    expected = 0.015 + 0.005 + 2 * A + 2 * 1_000_000 * 8 / RATE + 250_000 * 2e-6
    assert rows[1]["iteration_s"] == pytest.approx(expected, abs=1e-5)
    with pytest.raises(ValueError, match="push"):
        ShardCpu(-1.0, 0.0, 0.0)


def test_a_synchronous_push_is_charged_only_its_last_chunk_sum_off_the_shard_server(tmp_path):
    """ps, 2 workers, 1 µs per value of push: the emulator's shard sums each 64 KiB chunk (16384 values) as
    it arrives, so a push waits for its last chunk's sum (16.4 ms for the weight), never its whole 0.25 s,
    and the two workers' pushes do not queue behind each other."""
    from synclab.sim.strategies import ShardCpu

    def seconds(cpu):
        spec, _ = prepare(_mlp_asgd(tmp_path, strategy="ps"))
        spec.transport.chunk_bytes = 65536
        rows = Simulation(spec, startup_s=A, shard_cpu=cpu).run().rows
        return sorted(r["iteration_s"] for r in rows if r["iteration"] == 3)

    base, charged = seconds(None), seconds(ShardCpu(1e-6, 0.0, 0.0))
    for b, c in zip(base, charged):
        assert c - b == pytest.approx(16384e-6 + 10e-6, abs=2e-3)


def test_shard_cpu_measurement():
    from synclab.calibrate import shard_cpu as mod

    m = mod.measure(10_000, repeats=3)
    assert all(m[k] > 0 for k in ("push_s", "update_s", "reply_s"))
    with pytest.raises(ValueError):
        mod.measure(0)
