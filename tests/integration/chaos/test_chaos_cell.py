"""The smallest fault matrix: `synclab chaos` kills a PS shard of a checkpointed PS job half-way (in network
namespaces), and the job must restart from its checkpoint and end with the undisturbed run's parameters,
every update once, nothing left behind; then drops every packet of a worker's link for 3 s (shorter than
the heartbeat timeout), which the job must ride out or recover from with the same parameters and the same
shard version counters. The full matrix runs by its documented command
(docs/results/fault-matrix.md)."""

import json

import pytest

from support.cluster import synclab

pytestmark = [pytest.mark.slow, pytest.mark.netns]

# smallcnn for 60 iterations: long enough that the job is still running when the fault lands half-way (an
# mlp of 20 iterations could end between the half-way report and the kill on an idle host).
SMALL = ["model.batch_size=16", "network.rate=null", "run.iterations=60", "run.warmup=1"]


def test_killed_ps_shard_and_dropped_link_end_bit_identical(tmp_path, netns_ready):
    args = ["chaos", "quickstart", "--fault", "kill:ps", "--fault", "drop:worker:3", "--out", tmp_path,
            "--heartbeat-timeout", "5"]
    for s in SMALL:
        args += ["--set", s]
    r = synclab(*args, timeout=400)
    assert r.returncode == 0, r.stdout + r.stderr
    cell = json.loads((tmp_path / "kill-ps" / "cell.json").read_text())
    assert cell["outcome"] == "recovered", cell
    assert cell["node"] == "ps0" and "ps0" in cell["restarts"][0]["reason"]
    assert cell["restarts"][0]["resumed_from"] >= cell["checkpoint_every"]
    assert cell["left_behind"] == {"processes": [], "netns": []}
    assert 0 < cell["restart_after_fault_s"] < cell["heartbeat_timeout_s"] + 15
    drop = json.loads((tmp_path / "drop-worker-3" / "cell.json").read_text())
    assert drop["outcome"] in ("unaffected", "recovered"), drop
    assert drop["node"] == "worker1" and drop["injection"]["dropped_packets"] > 0
    assert drop["version_counters_checked"] > 0
    assert drop["left_behind"] == {"processes": [], "netns": []}
    assert not (tmp_path / "drop-worker-3" / "baseline").exists()  # the kill cell's undisturbed run served both
