import ipaddress

import pytest

from synclab.linkprofile import profile_from_mapping
from synclab.netem import netns
from synclab.netem.netns import NetnsUnavailable, Topology, check_netns_support, new_prefix


def test_star_topology_names_and_addresses():
    t = Topology.star(["worker0", "worker1", "ps0"], prefix="slbab12", subnet="10.99.7.0/24")
    assert [n.address for n in t.nodes] == ["10.99.7.2", "10.99.7.3", "10.99.7.4"]
    assert t.bridge == "slbab12br" and t.host_veth("ps0") == "slbab12v2" and t.netns("worker1") == "slbab12-worker1"
    assert t.host_address is None
    assert "10.99.7.4\tps0" in t.hosts_file()
    assert Topology.star(["a"], prefix="slbab12", subnet="10.99.7.0/24", host_address=True).host_address == \
        "10.99.7.1"


def test_default_prefix_is_short_unique_and_names_fit_ifnamsiz():
    prefixes = {new_prefix() for _ in range(50)}
    assert len(prefixes) > 40 and all(p.startswith("slb") and len(p) == 7 for p in prefixes)
    t = Topology.star([f"worker{i}" for i in range(200)])
    assert all(len(t.host_veth(n.name)) <= 15 for n in t.nodes) and len(t.bridge) <= 15
    assert ipaddress.IPv4Network(t.subnet).is_private


def test_profiles_are_resolved_per_role():
    p = profile_from_mapping({"rate": "10gbit", "roles": {"ps": {"rate": "2gbit"}}}, name="mix")
    t = Topology.star(["w0", "ps0", "c"], profile=p, roles={"w0": "worker", "ps0": "ps"},
                      profiles={"c": profile_from_mapping({"rate": "1gbit"})})
    assert [n.profile.rate_bps for n in t.nodes] == [10**10, 2 * 10**9, 10**9]
    assert t.node("ps0").role == "ps"
    assert Topology.star(["x"]).node("x").profile is None


def test_topology_refuses_bad_input():
    with pytest.raises(ValueError, match="unique"):
        Topology.star(["a", "a"])
    with pytest.raises(ValueError, match="node name"):
        Topology.star(["Bad Name"])
    with pytest.raises(ValueError, match="prefix"):
        Topology.star(["a"], prefix="x")
    with pytest.raises(ValueError, match="prefix"):
        Topology.star(["a"], prefix="slbabcdef1")  # 10 characters: 'v' + a node index would not fit
    with pytest.raises(ValueError, match="do not fit"):
        Topology.star([f"n{i}" for i in range(300)], prefix="slbab12")
    with pytest.raises(KeyError, match="no node"):
        Topology.star(["a"]).netns("b")


def test_plan_records_what_each_step_creates():
    t = Topology.star(["a", "b"], prefix="slbab12", subnet="10.99.7.0/24")
    steps = t.plan()
    assert steps[0].cmd == ["ip", "link", "add", "name", "slbab12br", "type", "bridge"]
    assert [s.created for s in steps if s.created] == [
        ("link", "slbab12br"), ("netns", "slbab12-a"), ("link", "slbab12v0"), ("netns", "slbab12-b"),
        ("link", "slbab12v1")]
    veth = next(s for s in steps if s.created == ("link", "slbab12v0"))
    assert veth.cmd == ["ip", "link", "add", "name", "slbab12v0", "type", "veth", "peer", "name", "eth0",
                        "netns", "slbab12-a"]
    inside = [s.cmd for s in steps if s.netns == "slbab12-b"]
    assert ["ip", "addr", "add", "10.99.7.3/24", "dev", "eth0"] in inside
    assert ["ip", "link", "set", "dev", "lo", "up"] in inside
    assert t.forward_rule() == ["FORWARD", "-i", "slbab12br", "-o", "slbab12br", "-m", "comment", "--comment",
                                "slbab12", "-j", "ACCEPT"]


def test_exec_prefix():
    c = netns.NetnsCluster(Topology.star(["a"], prefix="slbab12"))
    assert c.exec_prefix("a") == ["ip", "netns", "exec", "slbab12-a"]
    assert c.address("a").endswith(".2")


def test_missing_privileges_and_iproute2_say_what_to_do():
    with pytest.raises(NetnsUnavailable) as e:
        check_netns_support(privileged=False, missing=[])
    msg = str(e.value)
    assert "needs root (CAP_NET_ADMIN)" in msg and "--isolation none" in msg and "app" in msg
    with pytest.raises(NetnsUnavailable, match=r"iproute2 is not installed \(ip, tc not found"):
        check_netns_support(privileged=True, missing=["ip", "tc"])
    check_netns_support(privileged=True, missing=[])


def test_unavailable_reason(monkeypatch):
    monkeypatch.setattr(netns.tc, "has_net_admin", lambda: False)
    assert "--isolation none" in netns.netns_unavailable_reason()
    monkeypatch.setattr(netns.tc, "has_net_admin", lambda: True)
    monkeypatch.setattr(netns.tc, "iproute2_missing", lambda: [])
    assert netns.netns_unavailable_reason() is None


@pytest.mark.parametrize("name, owner", [
    ("slbab12br", "slbab12"), ("slbab12v3", "slbab12"), ("slbab12-worker0", "slbab12"),
    ("slbprobe1234", "slbprobe1234"), ("slbab12x", None), ("slave0", None), ("eth0", None), ("slbzz12br", None),
])
def test_leftover_names_are_recognised_only_by_our_pattern(name, owner):
    assert netns._ours(name, "slb") == owner
    assert netns._ours(name, "slbab12") == (owner if owner == "slbab12" else None)
