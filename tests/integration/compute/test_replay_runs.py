"""Replay compute on real local clusters: every strategy runs unchanged on a replayed profile, the real
bytes move, iterations take at least the profiled time, and time dilation divides back."""

from __future__ import annotations

import csv
import math

import pytest

from support.cluster import run_spec, summary, synclab
from synclab.compute.profiler import measure_profile

pytestmark = pytest.mark.slow

STRATEGIES = {
    "local": [], "ps": [], "wfbp": [], "synceasgd": [], "mgwfbp": ["strategy.profile_iterations=2"],
    "mgwfbp-opt": ["strategy.profile_iterations=2"], "stanza": ["strategy.fc_workers=1"], "p3": [],
    "p3-slicing": [], "ssdsgd": ["strategy.warmup=1", "strategy.k=2"], "asgd": [],
}
MODEL_BYTES = 2_602_378 * 4  # smallcnn's parameters, float32


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory):
    p = measure_profile("smallcnn", batch_size=16, iterations=2, warmup=1)
    path = tmp_path_factory.mktemp("profile") / "smallcnn-b16-cpu.json"
    path.write_text(p.to_json())
    return path


def replay(out, profile_file, *overrides, timeout=300):
    return run_spec(out, "model.name=smallcnn", "network.rate=null", "run.iterations=5", "run.warmup=1",
                    "cluster.workers=3", "cluster.ps_shards=2", "compute.mode=replay",
                    f"compute.profile={profile_file}", *overrides, timeout=timeout)


def rows(out):
    return list(csv.DictReader((out / "iterations.csv").open()))


@pytest.mark.parametrize("strategy", list(STRATEGIES))
def test_every_strategy_runs_on_replayed_compute(tmp_path, profile_file, strategy):
    out = tmp_path / strategy
    r = replay(out, profile_file, f"strategy.name={strategy}", "compute.scale=0.3", *STRATEGIES[strategy])
    assert r.returncode == 0, f"{strategy}:\n{r.stdout}\n{r.stderr}"
    s = summary(out)
    assert s["compute_mode"] == "replay" and s["compute_profile"]["model"] == "smallcnn"
    assert s["batch_size"] == 16 and "schedule_error" in s
    assert s["compute_update"] == "replayed from the profile" and s["compute_profile_update_seconds"] > 0
    due = s["compute_replay_seconds"]
    assert due == pytest.approx(s["compute_profile_seconds"] * 0.3 * (3 if strategy == "local" else 1))
    records = rows(out)
    assert all(math.isnan(float(x["loss"])) for x in records)  # no model math, no loss
    assert all(x["schedule_error_s"] != "" for x in records)
    if strategy == "stanza":  # CONV and FC workers each replay their part: together at least one iteration's worth
        by_it = {}
        for x in records:
            by_it.setdefault(x["iteration"], []).append(float(x["compute_s"]))
        assert all(sum(v) >= 0.95 * due for v in by_it.values())
    else:  # replay is never early
        assert all(float(x["compute_s"]) >= 0.95 * due for x in records)
    sent = sum(s["bytes_sent"].values())
    if strategy == "stanza":  # boundary activations of the profile's size go out and their gradients come back
        assert sent >= 5 * 2 * (16 * 4096 * 4) * 2  # iterations x CONV workers x (K x A floats) x both ways
    elif strategy != "local":  # the real bytes cross the network: at least the model, per worker, per iteration
        assert sent >= 5 * 0.9 * MODEL_BYTES


def test_dilation_divides_times_back_and_slows_the_links(tmp_path, profile_file):
    figures = {}
    for d in (1, 2):
        out = tmp_path / f"d{d}"
        r = replay(out, profile_file, "strategy.name=ps", "network.rate=400mbit", "network.isolation=none",
                   f"run.dilation={d}", "run.iterations=6")
        assert r.returncode == 0, f"dilation {d}:\n{r.stdout}\n{r.stderr}"
        s = summary(out)
        assert s["dilation"] == d and s["link_rate_bps"] == 400_000_000
        figures[d] = s["iteration_seconds"]["mean"]
        trace = [(float(x["t_s"]), int(x["tx_bytes"])) for x in csv.DictReader((out / "traffic-worker0.csv").open())]
        window = 30  # bins of ~10 ms: the busiest 0.3 s of worker 0's sending
        peak = max((trace[i + window][1] - trace[i][1]) * 8 / (trace[i + window][0] - trace[i][0])
                   for i in range(len(trace) - window))  # tx_bytes is a running total
        assert peak <= 1.3 * 400e6 / d  # the host shaped the link at rate / D
    # de-dilated, the two runs describe the same emulated cluster (loose: a shared 2-core host)
    assert figures[2] == pytest.approx(figures[1], rel=0.35)


def test_replay_bad_input_exits_2_naming_the_problem(tmp_path, profile_file):
    r = replay(tmp_path / "a", profile_file, "model.name=mlp")
    assert r.returncode == 2 and "compute.profile" in r.stdout + r.stderr
    r = replay(tmp_path / "b", profile_file, "run.dilation=0")
    assert r.returncode == 2 and "run.dilation" in r.stdout + r.stderr
    r = synclab("profile", "nosuchnet")
    assert r.returncode == 2 and "unknown model" in r.stdout + r.stderr
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "smallcnn", "batch_size": 16}')
    r = replay(tmp_path / "c", bad)
    assert r.returncode == 2 and "device" in r.stdout + r.stderr
