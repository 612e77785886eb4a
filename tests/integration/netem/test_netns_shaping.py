"""Shaping for real: namespaces on a bridge, tbf/htb applied and read back, goodput measured, nothing left behind."""

import json
import os
import shutil
import subprocess
import sys
import time

import pytest

from support.netns import unavailable
from synclab.linkprofile import profile_from_mapping
from synclab.netem import tc
from synclab.netem.bench import iperf3_available, iperf3_goodput, tcp_goodput
from synclab.netem.netns import NetnsCluster, Topology, cleanup_leftovers, list_links, list_netns
from synclab.netem.profile import list_profiles

pytestmark = pytest.mark.netns

LOW, HIGH = 0.80, 1.05  # goodput / configured rate; ~0.957 expected (TCP/IP + Ethernet headers)


def leftovers(prefix: str) -> list[str]:
    found = [n for n in list_netns() if n.startswith(prefix)]
    found += [n for n in list_links() if n.startswith(prefix)]
    if shutil.which("iptables"):
        found += [line for line in tc.run_cmd(["iptables", "-S", "FORWARD"]).stdout.splitlines() if prefix in line]
    if os.path.isdir("/etc/netns"):
        found += [f"/etc/netns/{n}" for n in os.listdir("/etc/netns") if n.startswith(prefix)]
    found += [p for p in [f"/run/synclab/netns/{prefix}.json"] if os.path.exists(p)]
    return found


@pytest.fixture
def make_cluster(kernel_backends):
    made = []

    def make(names, profile=None, *, prefer=None, notsent_lowat=None, **kw):
        c = NetnsCluster(Topology.star(names, profile=profile, **kw), available=kernel_backends, prefer=prefer,
                         notsent_lowat=notsent_lowat)
        made.append(c)
        return c.up()

    yield make
    for c in made:
        c.down()
        assert leftovers(c.topology.prefix) == [], "teardown left objects behind"


def measure(c, rate_bps, what, report, *, duration_s=2.0, iperf=True):
    g = tcp_goodput(c.exec_prefix("b"), c.exec_prefix("a"), c.address("b"), duration_s=duration_s)
    report.append(dict(what=what, rate_bps=rate_bps, tool="tcp", goodput_bps=g.goodput_bps))
    if iperf and iperf3_available():
        i = iperf3_goodput(c.exec_prefix("b"), c.exec_prefix("a"), c.address("b"), duration_s=duration_s)
        report.append(dict(what=what, rate_bps=rate_bps, tool="iperf3", goodput_bps=i.goodput_bps,
                           retransmits=i.retransmits))
    return g


@pytest.mark.parametrize("backend", ["tbf", "htb"])
def test_shaped_goodput_matches_the_configured_rate(backend, kernel_backends, make_cluster, goodput_report):
    if backend not in kernel_backends:
        unavailable(f"kernel has no {backend}")
    p = profile_from_mapping({"rate": "200mbit", "direction": "both"}, name="200mbit")
    c = make_cluster(["a", "b"], p, prefer=(backend,))
    for node in ("a", "b"):
        applied = c.applied[node]
        assert applied.backend == backend and applied.left_to_app == frozenset() and applied.ifb_dev == "ifb0"
    ns_a, ns_b = c.topology.netns("a"), c.topology.netns("b")
    root = next(q for q in tc.read_qdiscs("eth0", ns_a) if q.is_root)
    rate = root.rate_bps if backend == "tbf" else next(
        k for k in tc.read_classes("eth0", ns_a) if k.handle == "1:1").rate_bps
    assert (root.kind, rate) == (backend, 200_000_000)
    before = root.sent_bytes

    g = measure(c, p.rate_bps, f"{backend} 200mbit egress+ingress", goodput_report)

    assert LOW <= g.goodput_bps / p.rate_bps <= HIGH, f"goodput {g.goodput_bps / 1e6:.1f} Mbit/s at 200 Mbit/s"
    # the bytes really went through both shapers: a's egress and b's ingress (ifb)
    after_egress = next(q for q in tc.read_qdiscs("eth0", ns_a) if q.is_root).sent_bytes
    after_ingress = next(q for q in tc.read_qdiscs("ifb0", ns_b) if q.is_root).sent_bytes
    assert after_egress - before >= g.bytes and after_ingress >= g.bytes


def test_live_reshape_changes_the_measured_rate(kernel_backends, make_cluster, goodput_report):
    slow = profile_from_mapping({"rate": "100mbit"}, name="100mbit")
    fast = profile_from_mapping({"rate": "300mbit"}, name="300mbit")
    c = make_cluster(["a", "b"], slow)
    g1 = measure(c, slow.rate_bps, f"{c.applied['a'].backend} 100mbit before reshape", goodput_report,
                 duration_s=1.5, iperf=False)
    prefer = "htb" if "htb" in kernel_backends else "tbf"  # change the qdisc kind too when we can
    a = c.shape("a", fast, choice=tc.choose_backend(fast, kernel_backends, True, prefer=(prefer,)))
    assert a.backend == prefer
    g2 = measure(c, fast.rate_bps, f"{prefer} 300mbit after reshape", goodput_report, duration_s=1.5, iperf=False)
    assert LOW <= g1.goodput_bps / slow.rate_bps <= HIGH
    assert LOW <= g2.goodput_bps / fast.rate_bps <= HIGH
    c.shape("a", None)
    assert all(q.is_default for q in tc.read_qdiscs("eth0", c.topology.netns("a")))


def test_every_stock_profile_applies_and_reads_back(kernel_backends, make_cluster):
    profiles = list_profiles()
    names = [f"n{i}" for i in range(len(profiles))]
    c = make_cluster(names, profiles={n: p for n, p in zip(names, profiles, strict=True)})
    for n, p in zip(names, profiles, strict=True):
        a = c.applied[n]
        ns = c.topology.netns(n)
        want = tc.choose_backend(p, kernel_backends, True)
        assert a.choice == want, p.name
        if not p.shapes_anything:
            assert a.backend == "none" and all(q.is_default for q in tc.read_qdiscs("eth0", ns))
            continue
        assert a.backend in ("netem", "tbf", "htb"), p.name
        if "netem" not in kernel_backends:
            assert a.left_to_app == {k for k in ("delay", "jitter", "loss") if getattr(p, f"{k}_s", None)
                                     or (k == "loss" and p.loss_pct)}, p.name
        qd = tc.read_qdiscs("eth0", ns)
        assert tc.verify(p, a.backend, qd, tc.read_classes("eth0", ns)) == []
        assert (a.ifb_dev is not None) == p.shapes_ingress
        if p.shapes_ingress:
            assert any(q.kind == "ingress" for q in qd)
            assert tc.verify(p, a.backend, tc.read_qdiscs("ifb0", ns), tc.read_classes("ifb0", ns)) == []


@pytest.mark.parametrize("backend", ["tbf", "htb"])
def test_apply_and_clear_are_idempotent_on_a_real_device(backend, kernel_backends, make_cluster):
    if backend not in kernel_backends:
        unavailable(f"kernel has no {backend}")
    c = make_cluster(["a", "b"])
    ns = c.topology.netns("a")
    p = profile_from_mapping({"rate": "1gbit", "direction": "both"})
    choice = tc.choose_backend(p, kernel_backends, True, prefer=(backend,))
    first = tc.apply("eth0", p, ns, choice=choice)
    again = tc.apply("eth0", p, ns, choice=choice)
    def settings(applied):  # what tc reads back, less the traffic counters
        return [(q.kind, q.handle, q.parent, q.rate_bps, q.burst_bytes, q.limit) for q in applied.egress]

    assert settings(first) == settings(again) and settings(first)[0][0] == ("tbf" if backend == "tbf" else "htb")
    slower = profile_from_mapping({"rate": "500mbit", "direction": "both"})
    changed = tc.apply("eth0", slower, ns, choice=choice)  # a live change of rate, same kind
    assert changed.backend == backend
    assert tc.clear("eth0", ns) != []
    assert tc.clear("eth0", ns) == []  # unshaped device: nothing to do, no error
    assert not tc.link_exists("ifbeth0", ns)
    assert all(q.is_default for q in tc.read_qdiscs("eth0", ns))


def test_forwarding_rule_and_dns_files(make_cluster):
    c = make_cluster(["a", "b"])
    if shutil.which("iptables"):
        rule = c.topology.forward_rule()
        assert tc.run_cmd(["iptables", "-C", *rule], check=False).returncode == 0
    ns = c.topology.netns("a")
    assert "127.0.0.1" in open(f"/etc/netns/{ns}/resolv.conf").read()
    t0 = time.monotonic()
    out = subprocess.run([*c.exec_prefix("a"), "getent", "hosts", "b"], capture_output=True, text=True, timeout=10)
    assert out.stdout.split()[0] == c.address("b")
    unknown = subprocess.run([*c.exec_prefix("a"), "getent", "hosts", "no-such-host.example"], capture_output=True,
                             timeout=10)
    assert unknown.returncode != 0 and time.monotonic() - t0 < 5  # no stall on an unreachable DNS server
    ping = subprocess.run([*c.exec_prefix("a"), sys.executable, "-c",
                           f"import socket; socket.create_connection(('{c.address('b')}', 9), 3)"],
                          capture_output=True, text=True, timeout=10)
    assert "refused" in ping.stderr.lower()  # b answered with RST: the bridge forwards between nodes


def test_teardown_removes_everything_and_is_idempotent(kernel_backends):
    p = profile_from_mapping({"rate": "100mbit", "direction": "both"})
    c = NetnsCluster(Topology.star(["a", "b"], profile=p), available=kernel_backends)
    with c:
        prefix = c.topology.prefix
        assert leftovers(prefix)
    assert leftovers(prefix) == []
    assert c.down() == []


def test_cleanup_leftovers_after_a_crash(kernel_backends):
    p = profile_from_mapping({"rate": "100mbit", "direction": "both"})
    c = NetnsCluster(Topology.star(["a", "b"], profile=p), available=kernel_backends)
    c.up()
    prefix = c.topology.prefix
    try:
        assert cleanup_leftovers(prefix) == []  # owner (this process) alive: left alone
        dead = subprocess.Popen([sys.executable, "-c", "pass"])
        dead.wait()
        state = json.loads(c.state_file.read_text())
        state["pid"] = dead.pid
        c.state_file.write_text(json.dumps(state))
        removed = cleanup_leftovers(prefix)
        assert any(r.startswith("netns") for r in removed) and any("br" in r for r in removed)
        assert leftovers(prefix) == []
    finally:
        c.down()
    assert leftovers(prefix) == []


def test_a_failed_build_removes_what_it_made(kernel_backends, monkeypatch):
    bad = profile_from_mapping({"rate": "100mbit"})
    c = NetnsCluster(Topology.star(["a", "b"], profile=bad), available=kernel_backends)
    real_apply = tc.apply

    def failing_apply(dev, profile, netns=None, **kw):
        if netns and netns.endswith("-b"):
            raise tc.ShapingError("injected failure")
        return real_apply(dev, profile, netns, **kw)

    monkeypatch.setattr(tc, "apply", failing_apply)
    with pytest.raises(tc.ShapingError, match="injected"):
        c.up()
    assert c.created == [] and leftovers(c.topology.prefix) == []


def test_detected_backends_are_reported(kernel_backends):
    assert kernel_backends <= set(tc.KERNEL_FEATURES)
    assert tc.detect_backends() == kernel_backends  # probing again gives the same answer
    assert f"{tc.PROBE_PREFIX}{os.getpid()}" not in list_netns()  # the probe namespace is gone


def test_notsent_lowat_is_set_in_every_namespace_and_only_there(make_cluster):
    def lowat(prefix):
        return int(subprocess.run([*prefix, "sysctl", "-n", "net.ipv4.tcp_notsent_lowat"], capture_output=True,
                                  text=True, check=True).stdout)

    host = lowat([])
    c = make_cluster(["a", "b"], notsent_lowat=65536)
    assert lowat(c.exec_prefix("a")) == lowat(c.exec_prefix("b")) == 65536
    assert lowat([]) == host  # a per-namespace setting: the host keeps its own
    plain = make_cluster(["c"])
    assert lowat(plain.exec_prefix("c")) == host
