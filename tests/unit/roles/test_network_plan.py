"""Which backend shapes a job's links, decided from the spec and what the machine offers (no root needed)."""

import pytest

from synclab.config import SpecError, parse_spec
from synclab.roles.network import apply_to_spec, resolve_network

KERNEL = frozenset({"htb", "tbf", "ifb"})


def plan(net, *, available=KERNEL, netns_unavailable=None):
    return resolve_network(parse_spec({"network": net}), kernel_available=available,
                           netns_unavailable=netns_unavailable)


def test_auto_prefers_netns_with_kernel_rate_shaping():
    p = plan({"profile": "4gbit"})
    assert (p.isolation, p.backend, p.app_shaping) == ("netns", "htb", [])  # htb first above 1 Gbit/s


def test_auto_falls_back_to_app_and_says_why():
    p = plan({"profile": "4gbit"}, netns_unavailable="needs root")
    assert (p.isolation, p.backend, p.app_shaping) == ("none", "app", ["rate"])
    assert any("needs root" in n for n in p.notes) and any("ingress" in n for n in p.notes)


def test_delay_without_netem_goes_to_the_transport():
    p = plan({"profile": "wan-20ms"})
    assert p.backend == "tbf" and p.app_shaping == ["delay", "jitter"]
    assert any("no netem" in n for n in p.notes)
    p = plan({"profile": "wan-20ms"}, available=KERNEL | {"netem"})
    assert p.backend == "netem" and p.app_shaping == []


@pytest.mark.parametrize("kw", [{}, {"netns_unavailable": "no root"}])
def test_loss_is_refused_without_netem(kw):
    with pytest.raises(SpecError, match="network.profile: loss needs tc netem"):
        plan({"profile": "lossy-1pct"}, **kw)


def test_netns_requested_but_unavailable_is_an_error():
    with pytest.raises(SpecError, match="network.isolation: no root"):
        plan({"profile": "1gbit", "isolation": "netns"}, netns_unavailable="no root")


def test_unshaped_and_inline():
    assert plan({}).backend == "none"
    p = plan({"rate": "300mbit", "delay": "5ms", "isolation": "none"}, netns_unavailable="x")
    assert p.backend == "app" and p.app_shaping == ["delay", "rate"]
    assert p.profile.rate_bps == 300_000_000 and p.profile.direction == "egress"


def test_resolved_spec_carries_the_profile_inline():
    s = parse_spec({"network": {"profile": "2gbit"}})
    s2 = apply_to_spec(s, resolve_network(s, kernel_available=KERNEL, netns_unavailable=None))
    assert s2.network.backend == "htb" and s2.network.isolation == "netns"
    assert isinstance(s2.network.profile, dict) and s2.network.rate_bps == 2_000_000_000


def test_profile_and_rate_together_are_refused():
    with pytest.raises(SpecError, match="either network.profile or network.rate"):
        parse_spec({"network": {"profile": "1gbit", "rate": "2gbit"}})


# -- cluster.colocate_ps --------------------------------------------------------------------------------------------


def colocated(net, cluster=None, **kw):
    spec = parse_spec({"network": net, "strategy": {"name": "ps"},
                       "cluster": {"workers": 2, "ps_shards": 2, "colocate_ps": True, **(cluster or {})}})
    return resolve_network(spec, kernel_available=KERNEL, **kw)


def test_colocated_shards_share_their_workers_machine():
    spec = parse_spec({"strategy": {"name": "ps"}, "cluster": {"workers": 3, "ps_shards": 2, "colocate_ps": True}})
    assert [spec.machine_of(n) for n in ("ps0", "ps1", "worker2", "coordinator")] == [
        "worker0", "worker1", "worker2", "coordinator"]
    apart = parse_spec({"strategy": {"name": "ps"}, "cluster": {"workers": 3, "ps_shards": 2}})
    assert apart.machine_of("ps0") == "ps0"


def test_colocation_needs_a_worker_machine_per_shard():
    with pytest.raises(SpecError, match="ps_shards .3. must not exceed cluster.workers .2."):
        parse_spec({"strategy": {"name": "ps"}, "cluster": {"workers": 2, "ps_shards": 3, "colocate_ps": True}})


def test_colocation_needs_kernel_shaping():
    with pytest.raises(SpecError, match="colocate_ps needs network.isolation netns"):
        colocated({"profile": "1gbit"}, netns_unavailable="needs root")
    assert colocated({"profile": "1gbit"}, netns_unavailable=None).isolation == "netns"
    assert colocated({}, netns_unavailable="needs root").isolation == "none"  # nothing shaped: nothing to share


def test_colocation_refuses_a_profile_that_shapes_shards_apart():
    with pytest.raises(SpecError, match="shapes the ps role apart"):
        colocated({"profile": {"name": "split", "rate": "1gbit", "roles": {"ps": {"rate": "2gbit"}}}},
                  netns_unavailable=None)


def test_the_transports_token_bucket_takes_the_profiles_burst():
    from synclab.roles.bootstrap import shaper_for

    def shaper(profile):
        s = parse_spec({"network": {"profile": profile, "isolation": "none"}})
        s = apply_to_spec(s, resolve_network(s, kernel_available=KERNEL, netns_unavailable="no root"))
        return shaper_for(s, "worker")

    assert shaper({"rate": "100mbit", "burst": "256KiB"}).bucket.burst_bytes == 256 * 1024
    derived = shaper({"rate": "100mbit"}).bucket.burst_bytes   # no burst given: derived from the rate
    assert derived != 256 * 1024 and derived > 64 * 1024
