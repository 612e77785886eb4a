"""The simulated network: start-up + bytes/rate, fair sharing, priority at chunk boundaries, ring time."""

from __future__ import annotations

import random

import pytest
import simpy

from synclab.linkprofile import profile_from_mapping
from synclab.sim.link import Link
from synclab.sim.network import Network, Nic
from synclab.sim.nodes import Cluster, ring_allreduce

RATE = 1e9
A = 0.001


def _net():
    env = simpy.Environment()
    return env, Network(env, random.Random(0))


def _link(net, tx, rx, policy="fifo", chunk=1 << 30):
    return Link(net, tx, rx, policy=policy, chunk_bytes=chunk, startup_s=A, delay_s=0.0)


def test_single_message_takes_startup_plus_bytes_over_rate():
    env, net = _net()
    done = []
    _link(net, Nic("a", RATE), Nic("b", RATE)).send(1_000_000, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(A + 1_000_000 * 8 / RATE)]


def test_two_flows_on_one_nic_share_it_fairly():
    env, net = _net()
    tx = Nic("a", RATE)
    done = []
    for dst in ("b", "c"):
        net.start_flow(tx, Nic(dst, RATE), 1_000_000, lambda: done.append(env.now))
    env.run()
    alone = 1_000_000 * 8 / RATE
    assert done == [pytest.approx(2 * alone), pytest.approx(2 * alone)]


def test_max_min_fairness_gives_spare_capacity_to_the_unconstrained_flow():
    env, net = _net()
    a, c = Nic("a", RATE), Nic("c", RATE)
    ends = {}
    net.start_flow(a, Nic("b", RATE), 1_000_000, lambda: ends.setdefault("ab", env.now))
    for k, src in enumerate(("a2", "d", "e")):
        net.start_flow(a if k == 0 else Nic(src, RATE), c, 1_000_000, lambda k=k: ends.setdefault(k, env.now))
    net.env.run(until=1e-9)
    flows = list(a.flows.values())
    rates = sorted(f.rate for f in flows)
    assert rates == [pytest.approx(RATE / 3), pytest.approx(2 * RATE / 3)]  # a->c is held to 1/3 at c


def test_priority_link_serves_higher_priority_first_at_chunk_boundaries():
    env, net = _net()
    link = _link(net, Nic("a", RATE), Nic("b", RATE), policy="priority", chunk=100_000)
    order = []
    link.send(1_000_000, lambda: order.append("low"), priority=5)
    env.run(until=A + 0.0001)  # the low-priority message is under way
    link.send(100_000, lambda: order.append("high"), priority=0)
    env.run()
    assert order == ["high", "low"]


def test_fifo_link_keeps_order():
    env, net = _net()
    link = _link(net, Nic("a", RATE), Nic("b", RATE), policy="fifo", chunk=100_000)
    order = []
    link.send(1_000_000, lambda: order.append("first"), priority=5)
    link.send(100_000, lambda: order.append("second"), priority=0)
    env.run()
    assert order == ["first", "second"]


@pytest.mark.parametrize("world", [2, 4, 16, 2048])
def test_ring_allreduce_time(world):
    env, net = _net()
    profile = profile_from_mapping({"rate": "1gbit", "direction": "both"})
    cluster = Cluster(net, profile, startup_s=A, chunk_bytes=1 << 30, policies={}, record_spans=False)
    numel = 4 * 1024 * 1024
    done = []
    ring_allreduce(cluster, world, numel, 4, lambda: done.append(env.now))
    env.run()
    m_bytes = numel * 4
    expected = 2 * (world - 1) / world * m_bytes * 8 / RATE + 2 * (world - 1) * A
    assert done[0] == pytest.approx(expected, rel=1e-3)


def test_an_urgent_message_to_one_peer_holds_back_bulk_to_another_as_the_transport_does():
    """One priority order per sender (P3 §4.2; transport.scheduler.SchedulerGroup): once the urgent message is
    queued, the bulk to the other peer stops after its chunk on the wire; the urgent one then has the NIC."""
    env, net = _net()
    tx = Nic("w", RATE)
    bulk = _link(net, tx, Nic("ps1", RATE), policy="priority", chunk=100_000)
    urgent = _link(net, tx, Nic("ps0", RATE), policy="priority", chunk=100_000)
    done = {}
    bulk.send(2_000_000, lambda: done.setdefault("bulk", env.now), priority=9)
    env.run(until=A + 0.00005)  # the bulk's first chunk is on the wire
    t_queued = env.now
    urgent.send(500_000, lambda: done.setdefault("urgent", env.now), priority=0)
    env.run()
    chunk, own = 100_000 * 8 / RATE, 500_000 * 8 / RATE
    # at most the bulk's chunk in flight shares the NIC with the urgent message, then it runs alone
    assert done["urgent"] - t_queued <= A + own + chunk + 1e-9
    both = (2_000_000 + 500_000) * 8 / RATE  # the NIC may idle during the urgent message's start-up, no longer
    assert A + both - 1e-9 <= done["bulk"] <= 2 * A + both + 1e-9


def test_equal_priorities_to_two_peers_share_the_nic():
    env, net = _net()
    tx = Nic("w", RATE)
    done = []
    for dst in ("ps0", "ps1"):
        _link(net, tx, Nic(dst, RATE), policy="priority", chunk=100_000).send(
            1_000_000, lambda: done.append(env.now), priority=3)
    env.run()
    assert done == [pytest.approx(A + 2 * 1_000_000 * 8 / RATE)] * 2


# -- cluster.colocate_ps: a shard on its worker's machine (reproduction-targets C2) -------------------------------


def _colocated_cluster(net):
    profile = profile_from_mapping({"rate": "8mbit", "direction": "egress"})
    return Cluster(net, profile, startup_s=A, chunk_bytes=1 << 20, policies={}, record_spans=False,
                   machine_of=lambda n: {"ps0": "worker0", "ps1": "worker1"}.get(n, n))


def test_a_colocated_shard_talks_to_its_worker_over_the_loopback():
    env, net = _net()
    cluster, done = _colocated_cluster(net), []
    cluster.send("worker0", "ps0", 1_000_000, lambda: done.append(env.now))
    env.run()
    assert done == [pytest.approx(A)]  # only the per-message cost: no NIC, no 1 s at 8 Mbit/s


def test_a_colocated_shard_shares_its_workers_nic_with_it():
    env, net = _net()
    cluster, done = _colocated_cluster(net), []
    cluster.send("worker0", "ps1", 1_000_000, lambda: done.append(("worker0", env.now)))
    cluster.send("ps0", "worker1", 1_000_000, lambda: done.append(("ps0", env.now)))
    env.run()
    # both leave through worker0's machine: 2 MB at 8 Mbit/s, fairly shared, end together at 2 s
    assert [t for _, t in done] == [pytest.approx(A + 2.0)] * 2


def test_a_flow_alone_runs_at_its_slowest_nic_and_shares_once_another_joins():
    """The lone-flow shortcut (no component walk) must agree with progressive filling as flows come and go."""
    env, net = _net()
    a, slow = Nic("a", RATE), Nic("slow", RATE / 2)
    ends = {}
    net.start_flow(a, slow, 1_000_000, lambda: ends.setdefault("first", env.now))  # alone: RATE / 2
    env.run(until=0.004)  # 4 ms at 0.5 Gbit/s: 250 kB through, 750 kB left
    net.start_flow(a, Nic("b", RATE), 1_000_000, lambda: ends.setdefault("second", env.now))
    # a is shared: max-min gives the first flow RATE/2 (held at slow) and the second the other RATE/2
    assert sorted(f.rate for f in a.flows.values()) == [pytest.approx(RATE / 2)] * 2
    env.run()
    assert ends["first"] == pytest.approx(0.004 + 750_000 * 8 / (RATE / 2))  # 16 ms
    # the second ran at RATE/2 until 16 ms (750 kB), then alone at RATE for the last 250 kB
    assert ends["second"] == pytest.approx(0.016 + 250_000 * 8 / RATE)
    assert not a.flows and not slow.flows


def _two_links_one_nic(startup_s: float) -> tuple[float, float]:
    """Link A sends four 125 kB messages, link B one 500 kB message, both from one egress NIC at t = 0.
    Returns (B delivered, A's last delivered). 125 kB alone at RATE takes 1 ms."""
    env, net = _net()
    tx = Nic("tx", RATE)
    a = Link(net, tx, Nic("ra", RATE), policy="fifo", chunk_bytes=1 << 30, startup_s=startup_s, delay_s=0.0)
    b = Link(net, tx, Nic("rb", RATE), policy="fifo", chunk_bytes=1 << 30, startup_s=startup_s, delay_s=0.0)
    ends: dict[str, float] = {}
    for _ in range(4):
        a.send(125_000, lambda: ends.__setitem__("a", env.now))
    b.send(500_000, lambda: ends.__setitem__("b", env.now))
    env.run()
    return ends["b"], ends["a"]


def test_a_larger_startup_can_deliver_a_competing_link_earlier():
    """Issue 14: the model is not monotone per message in the start-up cost, and should not be. A link is
    idle on the wire during each message's start-up, and max-min sharing gives its share to the flows
    beside it (a work-conserving NIC, as TCP connections share a real one). B shares the NIC with A's
    stream of small messages: with a = 0 they split it all along and both end at 8 ms; with a = 1 ms, A's
    start-ups between its messages (3-4 ms, 6-7 ms) leave B alone on the NIC, and B ends at 7 ms — earlier —
    while A's last message ends at 10 ms. If B carries what a gate waits for, the iteration gets shorter."""
    b0, a0 = _two_links_one_nic(0.0)
    b1, a1 = _two_links_one_nic(0.001)
    assert (b0, a0) == (pytest.approx(0.008), pytest.approx(0.008))
    assert (b1, a1) == (pytest.approx(0.007), pytest.approx(0.010))
    # the NIC's makespan (the last byte of either) still grows with the start-up
    assert max(b1, a1) > max(b0, a0)
