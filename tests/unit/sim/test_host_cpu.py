"""The emulator's host CPU as a simulated resource: capacity, processor sharing, serial work after a message."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import simpy
from typer.testing import CliRunner

from synclab.cli import app
from synclab.config import load_spec
from synclab.sim.host import CpuServer, HostCpu
from synclab.sim.link import Link
from synclab.sim.network import Network, Nic
from synclab.sim.records import write_run
from synclab.sim.run import simulate


def _net(host=None):
    env = simpy.Environment()
    return env, Network(env, random.Random(0), host)


def test_capacity_is_cores_times_dilation_over_overlapped_cost_and_mirrors():
    # 2 cores, 2 ns/B of which 0.5 serial: 1.5 ns/B overlapped -> 2 * 8 / 1.5e-9 bit/s
    h = HostCpu(2, 2e-9, serial_s_per_byte=0.5e-9)
    assert h.capacity_bps == pytest.approx(2 * 8 / 1.5e-9)
    assert HostCpu(2, 2e-9, dilation=8).capacity_bps == pytest.approx(8 * 2 * 8 / 2e-9)
    assert HostCpu(2, 2e-9, mirrored=4).capacity_bps == pytest.approx(2 * 8 / 2e-9 / 4)
    assert HostCpu(1, 1e-9, serial_s_per_byte=1e-9).capacity_bps == float("inf")


@pytest.mark.parametrize("kwargs", [dict(cores=0, cpu_s_per_byte=1e-9), dict(cores=2, cpu_s_per_byte=0),
                                    dict(cores=2, cpu_s_per_byte=1e-9, serial_s_per_byte=2e-9),
                                    dict(cores=2, cpu_s_per_byte=1e-9, dilation=0.5),
                                    dict(cores=2, cpu_s_per_byte=1e-9, mirrored=0)])
def test_bad_host_settings_are_refused(kwargs):
    with pytest.raises(ValueError):
        HostCpu(**kwargs)


def test_a_flow_is_held_to_the_host_cpu_when_it_is_the_bottleneck():
    # 1 core, 10 ns/B: the host moves 0.1 GB/s = 0.8 Gbit/s < the 10 Gbit/s NICs; 1 MB takes 10 ms
    env, net = _net(HostCpu(1, 1e-8))
    done = []
    net.start_flow(Nic("a", 10e9), Nic("b", 10e9), 1_000_000, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(0.010)]


def test_flows_on_distinct_nics_share_the_host():
    # two flows on separate NIC pairs, each alone 8 ms at 1 Gbit/s; the host (1 core, 4 ns/B = 2 Gbit/s)
    # carries both at 1 Gbit/s: unchanged. At 8 ns/B (1 Gbit/s for both together) each takes 16 ms.
    for c, expect in ((4e-9, 0.008), (8e-9, 0.016)):
        env, net = _net(HostCpu(1, c))
        done = []
        for k in range(2):
            net.start_flow(Nic(f"t{k}", 1e9), Nic(f"r{k}", 1e9), 1_000_000, lambda: done.append(env.now))
        env.run()
        assert done == [pytest.approx(expect)] * 2


def _server(cores):
    env, net = _net()
    return env, CpuServer(net, cores)


def test_processor_sharing_one_core_two_jobs_finish_together():
    env, cpu = _server(1)
    done = []
    for _ in range(2):
        cpu.submit(1.0, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(2.0)] * 2


def test_two_cores_run_two_jobs_at_full_speed_but_one_job_gets_one_core():
    env, cpu = _server(2)
    done = []
    for _ in range(2):
        cpu.submit(1.0, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(1.0)] * 2
    env, cpu = _server(2)
    cpu.submit(1.0, lambda: done.append(env.now))
    env.run()
    assert done[-1] == pytest.approx(1.0)


def test_a_late_arrival_slows_the_running_job():
    # 1 core: A (1 s) from 0; B (1 s) at 0.5 -> A has 0.5 left at half speed: 1.5; B then alone: 2.0
    env, cpu = _server(1)
    done = {}
    cpu.submit(1.0, lambda: done.setdefault("A", env.now))
    env.timeout(0.5).callbacks.append(lambda _: cpu.submit(1.0, lambda: done.setdefault("B", env.now)))
    env.run()
    assert done == {"A": pytest.approx(1.5), "B": pytest.approx(2.0)}


def test_a_mirrored_job_counts_as_its_weight():
    # weight 4 (four identical ranks) on 2 cores: each at half a core, 1 s of work takes 2 s
    env, cpu = _server(2)
    done = []
    cpu.submit(1.0, lambda: done.append(env.now), weight=4)
    env.run()
    assert done == [pytest.approx(2.0)]


def test_a_message_pays_its_serial_work_after_its_last_byte_and_dilation_divides_it():
    a, nbytes = 0.001, 1_000_000
    for dilation, serial_s in ((1, 0.001), (8, 0.001 / 8)):
        env, net = _net(HostCpu(2, 2e-9, serial_s_per_byte=1e-9, dilation=dilation))
        done = []
        Link(net, Nic("a", 1e9), Nic("b", 1e9), policy="fifo", chunk_bytes=1 << 30, startup_s=a,
             delay_s=0.0).send(nbytes, lambda: done.append(env.now))
        env.run()
        assert done == [pytest.approx(a + nbytes * 8 / 1e9 + serial_s)]


def test_without_a_host_nothing_changes():
    env, net = _net()
    done = []
    Link(net, Nic("a", 1e9), Nic("b", 1e9), policy="fifo", chunk_bytes=1 << 30, startup_s=0.001,
         delay_s=0.0).send(1_000_000, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(0.001 + 0.008)]


QUICKSTART = Path(__file__).resolve().parents[3] / "examples" / "quickstart.yaml"
BASE = ["compute.mode=replay", "run.iterations=3", "run.warmup=1", "compute.scale=0.01", "network.rate=1gbit"]


def test_simulated_mgwfbp_fit_b_carries_the_serial_cost_at_two_workers():
    # 2 workers, ring of M bytes: 2 steps of M/2, each at 1 Gbit/s (the host's 2 cores are not the
    # bottleneck; payload 1448 of every 1514 wire bytes) plus M/2 * serial after it:
    # b = 8 ns/B * 1514/1448 + 0.6 ns/B; a = 2 start-ups
    spec = load_spec(QUICKSTART, [*BASE, "strategy.name=mgwfbp", "strategy.profile_iterations=1",
                                  "cluster.workers=2"])
    fit = simulate(spec, startup_s=0.0005, host_cores=2, cpu_s_per_byte=2e-9,
                   serial_s_per_byte=0.6e-9, tbf_bucket=False).plan["cost_fit"]
    assert fit["b"] == pytest.approx(8e-9 * 1514 / 1448 + 0.6e-9, rel=1e-6)
    assert fit["a"] == pytest.approx(0.001, rel=1e-4)
    plain = simulate(spec, startup_s=0.0005).plan["cost_fit"]
    assert plain["b"] == pytest.approx(8e-9 * 1514 / 1448, rel=1e-6)


def test_host_cpu_slows_a_crowded_ring_and_is_recorded(tmp_path):
    spec = load_spec(QUICKSTART, [*BASE, "strategy.name=synceasgd", "cluster.workers=8"])
    free, host = simulate(spec), simulate(spec, host_cores=2)
    assert free.host_cpu is None and host.host_cpu["mirrored"] == 8
    mean = lambda r: sum(x["iteration_s"] for x in r.rows) / len(r.rows)  # noqa: E731
    assert mean(host) > mean(free)
    assert write_run(host, tmp_path)["host_cpu"]["cores"] == 2


def test_cli_cpu_cost_needs_host_cores(tmp_path):
    res = CliRunner().invoke(app, ["simulate", str(QUICKSTART), "--out", str(tmp_path / "r"),
                                   "--cpu-s-per-gb", "2", "--set", "compute.mode=replay"])
    assert res.exit_code == 2 and "--host-cpu" in res.output


def test_payload_share_slows_the_nics_and_is_checked():
    from synclab.linkprofile import profile_from_mapping
    from synclab.sim.nodes import Cluster

    env, net = _net()
    profile = profile_from_mapping({"rate": "1gbit", "direction": "both"})
    c = Cluster(net, profile, startup_s=0.0, chunk_bytes=1 << 30, policies={}, record_spans=False,
                payload_share=0.5)
    done = []
    c.send("worker0", "worker1", 1_000_000, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(0.016)]  # half the rate carries payload
    with pytest.raises(ValueError):
        Cluster(net, profile, startup_s=0.0, chunk_bytes=1, policies={}, record_spans=False, payload_share=0)


def test_with_the_host_modelled_dilation_divides_the_start_up_too():
    # the start-up a is the emulator host's time per message: under dilation D it is a/D emulated
    spec = load_spec(QUICKSTART, [*BASE, "strategy.name=mgwfbp", "strategy.profile_iterations=1",
                                  "cluster.workers=2", "run.dilation=8"])
    fit = simulate(spec, startup_s=0.0008, host_cores=2, tbf_bucket=False).plan["cost_fit"]
    assert fit["a"] == pytest.approx(2 * 0.0008 / 8, rel=1e-3)
    assert simulate(spec, startup_s=0.0008).plan["cost_fit"]["a"] == pytest.approx(0.0016, rel=1e-4)


def test_concurrent_start_ups_share_the_host_cores():
    # the start-up is the host's per-message CPU: two messages on separate NIC pairs start together on one
    # core and each takes 2a; on two cores each takes a; without the host each takes a
    a = 0.001
    for host, expect in ((HostCpu(1, 1e-12), 2 * a), (HostCpu(2, 1e-12), a), (None, a)):
        env, net = _net(host)
        done = []
        for k in range(2):
            Link(net, Nic(f"t{k}", 1e12), Nic(f"r{k}", 1e12), policy="fifo", chunk_bytes=1 << 30, startup_s=a,
                 delay_s=0.0).send(1, lambda: done.append(env.now))
        env.run()
        assert done == [pytest.approx(expect, rel=1e-3)] * 2


def test_a_ring_of_eight_on_two_cores_fits_four_times_the_start_up_of_two():
    # the emulator's fitted a grows with its process count on the same cores (0.97 ms at 2 workers,
    # 3.3 ms at 8, CHANGELOG.md "Simulator: start-up, host-CPU model and scale"): with the host modelled,
    # the ring's 2(N-1) start-ups per all-reduce run at cores / N of a core each
    fits = {}
    for n in (2, 8):
        spec = load_spec(QUICKSTART, [*BASE, "strategy.name=mgwfbp", "strategy.profile_iterations=1",
                                      f"cluster.workers={n}"])
        fits[n] = simulate(spec, startup_s=0.0005, host_cores=2, tbf_bucket=False).plan["cost_fit"]["a"]
    assert fits[2] == pytest.approx(2 * 0.0005, rel=1e-3)
    assert fits[8] == pytest.approx(2 * 7 * 0.0005 * 8 / 2, rel=0.05)
