"""`synclab run` with netns isolation: kernel shaping per node, live reshaping, complete teardown."""

import json
import signal
import subprocess
import sys
import time
import urllib.request

import pytest
import torch

from support.cluster import FAST, QUICKSTART, REPO, run_spec, summary, synclab

pytestmark = [pytest.mark.netns, pytest.mark.slow]


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_netns_run_reports_kernel_backend_and_leaves_nothing(tmp_path, kernel_backends):
    r = run_spec(tmp_path, *FAST, "network.rate=null", "network.profile=1gbit", "network.isolation=netns")
    assert r.returncode == 0, r.stderr
    s = summary(tmp_path)
    assert s["network_isolation"] == "netns" and s["network_backend"] in ("tbf", "htb", "netem")
    assert s["link_rate_bps"] == 1_000_000_000
    net = json.loads((tmp_path / "network.json").read_text())
    assert {n["backend"] for n in net["nodes"].values()} == {s["network_backend"]}
    assert not {n["netns"] for n in net["nodes"].values()} & namespaces()
    assert f"network backend {s['network_backend']}" in r.stderr  # the CLI says which backend ran


def test_loss_without_netem_is_refused(tmp_path, kernel_backends):
    if "netem" in kernel_backends:
        pytest.skip("this kernel has netem: loss is applied, not refused")
    r = run_spec(tmp_path / "run", *FAST, "network.rate=null", "network.profile=lossy-1pct")
    assert r.returncode == 2
    assert "network.profile" in r.stderr and "netem" in r.stderr


def _metric(url: str, name: str, labels: str) -> float | None:
    """The metric's value; None while the endpoint is not up yet (it starts right after registration)."""
    try:
        text = urllib.request.urlopen(url, timeout=5).read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name + "{") and labels in line:
            return float(line.rsplit(" ", 1)[1])
    return None


def test_live_reshape_through_the_coordinator(tmp_path, kernel_backends):
    args = [sys.executable, "-m", "synclab", "run", str(QUICKSTART), "--out", str(tmp_path), "--no-report"]
    for o in [*FAST, "network.rate=null", "network.profile=2gbit", "network.isolation=netns",
              "run.iterations=100000"]:
        args += ["--set", o]
    proc = subprocess.Popen(args, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 300  # generous: a loaded 2-core machine starts 5 processes slowly
        while not (tmp_path / "endpoints.json").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        url = json.loads((tmp_path / "endpoints.json").read_text())["worker1"]["metrics_url"]
        while _metric(url, "synclab_link_rate_bits_per_second", 'direction="egress"') != 2e9:
            assert time.monotonic() < deadline
            time.sleep(0.2)
        r = synclab("shape", "--run", tmp_path, "--profile", "1gbit", "--role", "worker", timeout=60)
        assert r.returncode == 0, r.stderr
        while _metric(url, "synclab_link_rate_bits_per_second", 'direction="egress"') != 1e9:
            assert time.monotonic() < deadline, "worker1 never applied the new profile"
            time.sleep(0.2)
        bad = synclab("shape", "--run", tmp_path, "--profile", "1gbit", "--node", "worker9", timeout=60)
        assert bad.returncode != 0 and "worker9" in bad.stderr
        assert "1gbit" in (tmp_path / "network-changes.csv").read_text()
    finally:
        proc.send_signal(signal.SIGINT)
        proc.communicate(timeout=120)
    net = json.loads((tmp_path / "network.json").read_text())
    assert not {n["netns"] for n in net["nodes"].values()} & namespaces()
    assert json.loads((tmp_path / "status.json").read_text())["status"] == "interrupted"


def test_colocated_shards_run_in_their_workers_namespaces_and_train_alike(tmp_path, kernel_backends):
    """cluster.colocate_ps (P3's and SSD-SGD's setting): ps<i> in worker<i>'s namespace, on its shaped link."""
    common = [*FAST, "strategy.name=ps", "cluster.workers=2", "cluster.ps_shards=2"]
    local = run_spec(tmp_path / "local", *[o for o in common if o != "strategy.name=ps"], "strategy.name=local")
    assert local.returncode == 0, local.stderr
    out = tmp_path / "colocated"
    r = run_spec(out, *common, "network.rate=null", "network.profile=1gbit", "network.isolation=netns",
                 "cluster.colocate_ps=true")
    assert r.returncode == 0, r.stderr
    net = json.loads((out / "network.json").read_text())
    assert net["colocated"] == {"ps0": "worker0", "ps1": "worker1"}
    assert set(net["nodes"]) == {"coordinator", "worker0", "worker1"}  # no namespace of the shards' own
    endpoints = json.loads((out / "endpoints.json").read_text())
    for i in (0, 1):
        assert endpoints[f"ps{i}"]["address"].split(":")[0] == endpoints[f"worker{i}"]["address"].split(":")[0]
    ref, got = torch.load(tmp_path / "local" / "params.pt"), torch.load(out / "params.pt")
    for k in ref:
        assert torch.allclose(ref[k], got[k], rtol=1e-5, atol=1e-6), k
