"""Real local clusters: ps and wfbp change scheduling, never the math."""

import csv
import socket

import pytest
import torch

from support.cluster import FAST, run_spec, summary

pytestmark = pytest.mark.slow


@pytest.mark.parametrize("strategy", ["ps", "wfbp"])
def test_same_final_params_as_local(equivalence_runs, strategy):
    ref = torch.load(equivalence_runs["local"] / "params.pt")
    got = torch.load(equivalence_runs[strategy] / "params.pt")
    assert ref.keys() == got.keys()
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), f"{strategy}: {k} differs"
    # and training actually moved them: not a trivially equal pair of initial states
    assert summary(equivalence_runs[strategy])["final_loss"] != summary(equivalence_runs[strategy])["initial_loss"]


@pytest.mark.parametrize("strategy", ["ps", "wfbp"])
def test_workers_hold_identical_params_after_every_step(equivalence_runs, strategy):
    rows = list(csv.DictReader((equivalence_runs[strategy] / "iterations.csv").open()))
    by_it = {}
    for r in rows:
        by_it.setdefault(int(r["iteration"]), set()).add(r["params_checksum"])
    assert sorted(by_it) == list(range(1, 7))
    assert all(len(v) == 1 and "" not in v for v in by_it.values()), by_it


@pytest.mark.parametrize("strategy", ["ps", "wfbp"])
def test_records_are_complete(equivalence_runs, strategy):
    out = equivalence_runs[strategy]
    s = summary(out)
    for key in ("strategy", "workers", "ps_shards", "iterations", "throughput_samples_per_s", "iteration_seconds",
                "compute_seconds_mean", "comm_wait_seconds_mean", "bytes_sent", "network_backend", "initial_loss",
                "final_loss"):
        assert key in s, key
    assert s["strategy"] == strategy and s["workers"] == 2 and s["iterations"] == 6
    assert set(s["iteration_seconds"]) >= {"mean", "p50", "p99"}
    assert s["ps_shards"] == (2 if strategy == "ps" else 0)
    # every node says where it ran: processes of this machine, one pid each
    nodes = {"coordinator", "worker0", "worker1", *(f"ps{i}" for i in range(s["ps_shards"]))}
    assert set(s["placement"]) == nodes
    assert {p["host"] for p in s["placement"].values()} == {socket.gethostname()}
    assert len({p["pid"] for p in s["placement"].values()}) == len(nodes)
    for f in ("spec.yaml", "iterations.csv", "endpoints.json", "params.pt", "traffic-worker0.csv"):
        assert (out / f).exists(), f
    # every worker moved its gradients: at least one model's worth per iteration
    n_bytes = sum(t.numel() * 4 for t in torch.load(out / "params.pt").values())
    assert s["bytes_sent"]["worker0"] >= 6 * n_bytes
    # how busy the host was over the measured iterations: a fraction of its cores, read from /proc/stat
    host = s["host_cpu"]
    assert 0 < host["busy_fraction"] <= 1 and host["cores"] >= 1 and host["seconds"] > 0, host
    assert host["context_switches_per_s"] > 0 and host["saturated"] == (host["busy_fraction"] >= 0.9)
    # what Python's collector took from every node, folded in from the nodes' own files
    assert s["gc_pauses"]["nodes"] == len(nodes) - 1 and len(s["gc_pauses"]["collections"]) == 3
    assert not list(out.glob("gc-*.json"))


def test_loss_falls(tmp_path):
    r = run_spec(tmp_path, *FAST, "strategy.name=ps", "run.iterations=40", "optimizer.lr=0.1")
    assert r.returncode == 0, r.stderr
    s = summary(tmp_path)
    assert s["final_loss"] < 0.7 * s["initial_loss"], s


def _scrape_bytes(url: str, metric: str) -> float:
    import urllib.request

    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines() if line.startswith(metric + "{"))


def test_metrics_endpoints_answer_and_count_the_reported_bytes(tmp_path):
    import json
    import subprocess
    import sys
    import time

    from support.cluster import QUICKSTART, REPO

    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(tmp_path), "--no-report"]
    for o in [*FAST, "strategy.name=ps", "run.iterations=15", "run.linger_s=30"]:
        args += ["--set", o]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        during = []
        deadline = time.monotonic() + 240
        while not (tmp_path / "summary.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None, proc.stderr.read() if proc.poll() else "slow"
            if (tmp_path / "endpoints.json").exists():
                eps = json.loads((tmp_path / "endpoints.json").read_text())
                try:
                    during.append(_scrape_bytes(eps["worker0"]["metrics_url"], "synclab_bytes_sent_total"))
                except OSError:
                    pass
            time.sleep(0.1)
        assert during, "no metrics endpoint answered during the run"
        s = summary(tmp_path)
        eps = json.loads((tmp_path / "endpoints.json").read_text())
        assert set(eps) == {"worker0", "worker1", "ps0", "ps1"}
        for node in eps:
            assert _scrape_bytes(eps[node]["metrics_url"], "synclab_bytes_sent_total") == s["bytes_sent"][node], node
            assert _scrape_bytes(eps[node]["metrics_url"], "synclab_bytes_received_total") == \
                s["bytes_received"][node], node
        assert max(during) <= s["bytes_sent"]["worker0"]
    finally:
        proc.terminate()
        proc.wait(60)


def test_traffic_trace_follows_its_sampling_interval(tmp_path):
    """run.traffic_sample_ms sets the host time between two rows of every node's traffic CSV (10 ms by default,
    P3 Fig. 8/9's bin; coarser under dilation costs the 2-core host fewer wake-ups per node)."""
    # long enough for several rows however fast the host: 6 MLP iterations can end within one 200 ms interval
    r = run_spec(tmp_path, *FAST, "strategy.name=wfbp", "run.traffic_sample_ms=200", "run.iterations=300")
    assert r.returncode == 0, r.stderr
    t = [float(row["t_s"]) for row in csv.DictReader((tmp_path / "traffic-worker0.csv").open())]
    steps = sorted(b - a for a, b in zip(t, t[1:]))
    assert len(steps) >= 2 and 0.15 < steps[len(steps) // 2] < 0.6, steps
