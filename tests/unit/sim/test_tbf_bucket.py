"""The emulator's tbf bucket in the simulator (issue 14): a burst passes without wire time after an idle spell."""

from __future__ import annotations

import random

import pytest
import simpy

from synclab.linkprofile import LinkProfile
from synclab.sim.host import HostCpu
from synclab.sim.network import Network, Nic, TokenBucket
from synclab.sim.nodes import Cluster
from synclab.sim.run import PAYLOAD_SHARE
from synclab.transport.shaper import bucket_for


def _send(net, env, egress, ingress, nbytes, at):
    """Start a flow of ``nbytes`` at time ``at``; returns a list that gets its end time."""
    done = []
    env.process(_later(env, at, lambda: net.start_flow(egress, ingress, nbytes, lambda: done.append(env.now))))
    return done


def _later(env, at, fn):
    yield env.timeout(at)
    fn()


def test_a_full_bucket_passes_its_bytes_free_and_refills_only_while_idle():
    env = simpy.Environment()
    net = Network(env, random.Random(0))
    rate = 8e6  # 1 MB/s
    tx = Nic("a/tx", rate, TokenBucket(rate, 100_000 * 8))  # 100 kB bucket, full
    rx = Nic("b/rx", None)
    first = _send(net, env, tx, rx, 300_000, 0.0)     # 100 kB free, 200 kB at 1 MB/s: ends at 0.2 s
    second = _send(net, env, tx, rx, 100_000, 0.25)   # idle 0.2-0.25 s: 50 kB of tokens, 50 kB at rate
    third = _send(net, env, tx, rx, 10_000, 10.0)     # long idle: refilled to the cap, 10 kB free
    env.run()
    assert first == [pytest.approx(0.2)]
    assert second == [pytest.approx(0.30)]
    assert third == [pytest.approx(10.0)]
    assert tx.bucket.tokens == pytest.approx(90_000 * 8)


def test_no_bucket_charges_every_byte():
    env = simpy.Environment()
    net = Network(env, random.Random(0))
    tx, rx = Nic("a/tx", 8e6), Nic("b/rx", None)
    done = _send(net, env, tx, rx, 300_000, 0.0)
    env.run()
    assert done == [pytest.approx(0.3)]


def test_bucket_refuses_bad_settings():
    with pytest.raises(ValueError):
        TokenBucket(0, 100)
    with pytest.raises(ValueError):
        TokenBucket(1e9, -1)


@pytest.mark.parametrize("dilation", [1, 2, 4, 8])
def test_cluster_gives_nics_the_launchers_tbf_burst_only_with_the_host_modelled(dilation):
    p = LinkProfile.model_validate({"rate_bps": 1e9, "direction": "egress"})
    env = simpy.Environment()
    host = Network(env, random.Random(0), HostCpu(2, 2e-9, dilation=dilation))
    c = Cluster(host, p, startup_s=0.0, chunk_bytes=1 << 20, policies={}, record_spans=False,
                payload_share=PAYLOAD_SHARE)
    tx, rx, _ = c._node("worker0")
    burst = bucket_for(1e9 / dilation, kernel=True).burst_bytes  # 500 kB / D, at least 96 KiB (tbf, a GSO super-packet fits)
    assert tx.bucket.burst_bits == pytest.approx(burst * 8 * PAYLOAD_SHARE)
    assert tx.bucket.rate_bps == pytest.approx(1e9 * PAYLOAD_SHARE)  # emulated clock: the undilated rate
    assert rx.bucket is None  # egress-only profile: ingress not shaped
    real = Cluster(Network(env, random.Random(0)), p, startup_s=0.0, chunk_bytes=1 << 20, policies={},
                   record_spans=False, payload_share=PAYLOAD_SHARE)
    assert real._node("worker0")[0].bucket is None  # a real cluster's NIC has no burst above its rate


def _fit_medians(dilation, bucket):
    from pathlib import Path

    from synclab.config import load_spec
    from synclab.sim.run import simulate

    quickstart = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
    spec = load_spec(quickstart, ["compute.mode=replay", "run.iterations=2", "run.warmup=1", "compute.scale=0.01",
                                  "network.rate=1gbit", "strategy.name=mgwfbp", "strategy.profile_iterations=1",
                                  "cluster.workers=2", f"run.dilation={dilation}",
                                  "strategy.fit_sizes_params=[256,32768,4194304]"])
    fit = simulate(spec, startup_s=0.0005, host_cores=2, tbf_bucket=bucket).plan["cost_fit"]
    return dict(zip(fit["sizes"], fit["median_seconds"]))


def test_the_bucket_makes_mid_sizes_cheaper_the_more_the_less_dilated():
    # 2-worker ring of 128 kB: 2 messages of 64 kB, 0.55 ms each at 1 Gbit/s of payload. The tbf bucket is
    # 500 kB at D = 1 (4 ms of 1 Gbit/s) and 64 KiB at D = 8 (the floor; 4 ms of 125 Mbit/s is less), so the
    # messages pass almost free at D = 1 and only partly at D = 8; of the 16 MB size's 2 messages at most
    # one bucket each passes free.
    saved = {}
    for d in (1, 8):
        on, off = _fit_medians(d, True), _fit_medians(d, False)
        saved[d] = off[131072.0] - on[131072.0]
        burst_s = bucket_for(1e9 / d, kernel=True).burst_bytes * 8 / 1e9
        assert 0 < off[16777216.0] - on[16777216.0] <= 2 * burst_s * 1.001
    # (the free bytes still cost the host's CPU: 2 x 64 kB at 2 cores / (1.86 ns/B x 2 ranks) = 0.24 ms)
    assert saved[1] > 0.7 * 2 * 65536 * 8 / (1e9 * PAYLOAD_SHARE)
    assert 0 < saved[8] < saved[1]


def test_cli_no_tbf_bucket_needs_host_cores(tmp_path):
    from pathlib import Path

    from typer.testing import CliRunner

    from synclab.cli import app

    quickstart = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
    res = CliRunner().invoke(app, ["simulate", str(quickstart), "--out", str(tmp_path / "r"), "--no-tbf-bucket",
                                   "--set", "compute.mode=replay"])
    assert res.exit_code == 2 and "--host-cpu" in res.output
