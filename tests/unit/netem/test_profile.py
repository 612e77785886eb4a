import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from synclab.linkprofile import (
    KNOWN_ROLES,
    LinkProfile,
    ProfileError,
    format_rate,
    parse_rate,
    profile_from_mapping,
    resolve_for_role,
)
from synclab.netem.profile import (
    default_search_dirs,
    human,
    list_profiles,
    load_profile,
    package_profiles_dir,
)
from synclab.netem.tc.commands import htb_quantum_bytes_for
from synclab.transport.shaper import Bucket, bucket_for, profile_bucket

STOCK = {"1gbit": 10**9, "2gbit": 2 * 10**9, "4gbit": 4 * 10**9, "6gbit": 6 * 10**9, "10gbit": 10**10,
         "15gbit": 15 * 10**9, "25gbit": 25 * 10**9, "40gbit": 40 * 10**9, "100gbit": 10**11, "unshaped": None,
         "wan-20ms": 10**9, "lossy-1pct": 10**9}


def test_every_stock_profile_loads_with_its_rate():
    profiles = {p.name: p for p in list_profiles()}
    assert set(STOCK) <= set(profiles)
    for name, rate in STOCK.items():
        assert profiles[name].rate_bps == rate, name
        assert profiles[name].description


def test_stock_impairments():
    wan, lossy = load_profile("wan-20ms"), load_profile("lossy-1pct")
    assert wan.delay_s == pytest.approx(0.020) and 0 < wan.jitter_s < wan.delay_s and wan.loss_pct == 0
    assert lossy.loss_pct == 1.0 and lossy.delay_s == 0
    assert not load_profile("unshaped").shapes_anything
    assert load_profile("4gbit").direction == "both"


def test_checkout_netem_profiles_is_the_packaged_copy():
    repo = Path(__file__).resolve().parents[3] / "netem" / "profiles"
    if not repo.exists():
        pytest.skip("not running from a checkout")
    assert repo.resolve() == package_profiles_dir().resolve(), "netem/profiles must link to src/synclab/netem/profiles"


def test_packaged_profiles_load_without_the_repository():
    names = {p.name for p in list_profiles([package_profiles_dir()])}
    assert set(STOCK) <= names


def test_human_units_parse_at_the_edge():
    p = profile_from_mapping({"rate": "100mbit", "burst": "1.5MB", "queue": "64KiB", "delay": "20ms",
                              "jitter": "500us", "loss": "1%", "direction": "both"})
    assert (p.rate_bps, p.burst_bytes, p.queue_bytes) == (100_000_000, 1_500_000, 65536)
    assert p.delay_s == pytest.approx(0.02) and p.jitter_s == pytest.approx(0.0005)
    assert p.loss_pct == 1.0 and p.shapes_ingress and p.shapes_egress
    assert profile_from_mapping({"rate": "4gbit"}).rate_bps == 4_000_000_000
    assert profile_from_mapping({"rate": 1e9, "loss": 0.5, "delay": 0.001}).loss_pct == 0.5
    assert profile_from_mapping({"rate": "4Gbit", "delay": "1s"}).delay_s == 1.0


@pytest.mark.parametrize("data, field, words", [
    ({"rate": "-4gbit"}, "rate", "negative"),
    ({"rate": -5}, "rate", "negative"),
    ({"rate": "0mbit"}, "rate", "positive"),
    ({"rate": "4 gigabits"}, "rate", "unit"),
    ({"rate": "fast"}, "rate", "parse"),
    ({"loss": "150%"}, "loss", "100"),
    ({"loss": "-1%"}, "loss", "negative"),
    ({"loss": "lots"}, "loss", "parse"),
    ({"delay": "20 parsecs"}, "delay", "unit"),
    ({"delay": "nan"}, "delay", ""),
    ({"burst": "1.5 elephants", "rate": "1gbit"}, "burst", "unit"),
    ({"direction": "sideways"}, "direction", ""),
    ({"bandwidth": "1gbit"}, "bandwidth", "unknown field"),
    ({"rate": "1gbit", "roles": {"ps": {"rate": "-1mbit"}}}, "roles.ps.rate", "negative"),
    ({"rate": "1gbit", "roles": {"gpu": {"rate": "1mbit"}}}, "roles", "unknown role"),
    ({"jitter": "2ms"}, "jitter", "delay"),
    ({"delay": "1ms", "jitter": "2ms"}, "jitter", "exceed"),
    ({"burst": "64KiB"}, "burst", "rate"),
])
def test_bad_values_are_refused_naming_the_field(data, field, words):
    with pytest.raises(ProfileError) as e:
        profile_from_mapping(data, source="my.yaml")
    msg = str(e.value)
    assert msg.startswith("my.yaml: ") and field in msg and words in msg, msg


_units = st.sampled_from(["", "bit", "kbit", "mbit", "gbit", "tbit", "kbps", "ms", "s", "%", "MB", "KiB", "x", " "])
_text = st.one_of(
    st.text(max_size=12),
    st.builds(lambda sign, num, unit: f"{sign}{num}{unit}", st.sampled_from(["", "-", "+"]),
              st.one_of(st.integers(-10**30, 10**30), st.floats(allow_nan=True, allow_infinity=True)), _units),
    st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**30, 10**30), st.booleans(), st.none(),
    st.lists(st.integers(), max_size=2))


@given(field=st.sampled_from(["rate", "burst", "queue", "delay", "jitter", "loss"]), value=_text)
def test_any_input_either_validates_or_names_the_field(field, value):
    data = {field: value}
    if field in ("burst", "queue"):
        data["rate"] = "1gbit"
    if field == "jitter":
        data["delay"] = "60s"
    try:
        p = profile_from_mapping(data)
    except ProfileError as e:
        assert field in str(e)
        return
    assert p.rate_bps is None or 0 < p.rate_bps <= 10**13
    assert 0 <= p.loss_pct <= 100 and 0 <= p.delay_s <= 60 and 0 <= p.jitter_s <= 60
    assert all(v is None or v > 0 for v in (p.burst_bytes, p.queue_bytes))
    assert all(math.isfinite(v) for v in (p.delay_s, p.jitter_s, p.loss_pct))


@given(st.integers(1, 10**13))
def test_format_rate_round_trips(rate):
    assert parse_rate(format_rate(rate)) == rate


def test_burst_and_queue_follow_the_rate():
    assert bucket_for(200_000_000).burst_bytes == 100_000  # 4 ms of 200 Mbit/s
    assert bucket_for(1_000_000).burst_bytes == 64 << 10  # floor
    assert bucket_for(10**10).burst_bytes == 5_000_000
    assert bucket_for(10**9, kernel=True).burst_bytes == 500_000
    assert bucket_for(4 * 10**9, kernel=True).burst_bytes == 4_000_000  # tbf/htb: 8 ms above 1 Gbit/s
    assert bucket_for(4 * 10**9).burst_bytes == 2_000_000  # the app bucket: 4 ms
    assert htb_quantum_bytes_for(100_000) == 1600 and htb_quantum_bytes_for(10**6) == 12_500
    assert htb_quantum_bytes_for(10**10) == 200_000
    assert bucket_for(200_000_000) == Bucket(100_000, 625_000)  # queue: 25 ms of the rate
    assert bucket_for(10**6).queue_bytes == 131072  # 2 x burst
    assert bucket_for(10**6, burst_bytes=10_000, queue_bytes=20_000) == Bucket(10_000, 20_000)  # as configured


def test_a_kernel_bucket_holds_a_gso_super_packet():
    # 64 KiB of TCP payload in one skb counts ~68.5 kB in the qdisc (a header per segment); a tbf bucket below
    # that cuts it into MTU packets, 4-7x the host CPU per byte (2026-11-27)
    assert bucket_for(125_000_000, kernel=True).burst_bytes == 96 << 10 > 68_500
    assert bucket_for(125_000_000).burst_bytes == 64 << 10  # the app bucket keeps its floor
    assert bucket_for(250_000_000, kernel=True).burst_bytes == 125_000  # 4 ms of the rate is larger
    assert bucket_for(125_000_000, kernel=True, burst_bytes=10_000).burst_bytes == 10_000  # as configured
    assert bucket_for(10_000_000, kernel=True).queue_bytes == 2 * (96 << 10)  # 25 ms of 10 Mbit/s is less


def test_the_app_bucket_holds_a_chunk_on_top_of_the_floor():
    assert bucket_for(100e6, chunk_bytes=1 << 20).burst_bytes == (1 << 20) + (64 << 10)
    assert bucket_for(100e9, chunk_bytes=1 << 20).burst_bytes == int(100e9 / 8 * 0.004)  # 4 ms is larger
    assert bucket_for(10**6, chunk_bytes=1 << 20).queue_bytes == 2 * ((1 << 20) + (64 << 10))
    p = profile_from_mapping({"rate": "200mbit"})
    assert profile_bucket(p) == Bucket(100_000, 625_000)
    assert profile_bucket(profile_from_mapping({"rate": "200mbit", "burst": "1MB"})).burst_bytes == 1_000_000
    assert profile_bucket(LinkProfile()) is None


def test_role_override_replaces_only_its_keys():
    p = profile_from_mapping({"rate": "10gbit", "delay": "1ms", "roles": {"ps": {"rate": "2gbit"}}}, name="mix")
    ps = resolve_for_role(p, "ps")
    assert ps.rate_bps == 2 * 10**9 and ps.delay_s == pytest.approx(0.001) and not ps.roles
    assert ps.name == "mix[ps]"
    assert resolve_for_role(p, "worker").rate_bps == 10**10
    assert resolve_for_role(p, None) == resolve_for_role(p, "coordinator")
    assert set(KNOWN_ROLES) >= {"worker", "ps", "coordinator"}
    assert human(p)["roles"] == {"ps": {"rate": "2gbit"}}


def test_load_by_path_and_search_order(tmp_path, monkeypatch):
    own = tmp_path / "mine"
    own.mkdir()
    (own / "4gbit.yaml").write_text("rate: 3gbit\ndescription: shadowing the stock one\n")
    (own / "slow-ps.yaml").write_text("rate: 10gbit\nroles:\n  ps: {rate: 2gbit}\n")
    assert load_profile("4gbit", [own, package_profiles_dir()]).rate_bps == 3 * 10**9
    assert load_profile(own / "slow-ps.yaml").roles["ps"].rate_bps == 2 * 10**9
    assert load_profile(str(own / "slow-ps.yaml")).name == "slow-ps"
    names = [p.name for p in list_profiles([own])]
    assert names == ["4gbit", "slow-ps"]
    monkeypatch.setenv("SYNCLAB_PROFILES_DIR", str(own))
    assert default_search_dirs()[0] == own
    assert load_profile("slow-ps").rate_bps == 10**10
    assert load_profile("4gbit").rate_bps == 3 * 10**9  # the env dir comes first
    assert default_search_dirs(env={}) == [package_profiles_dir()]
    two = tmp_path / "two"
    assert default_search_dirs(env={"SYNCLAB_PROFILES": str(two), "SYNCLAB_PROFILES_DIR": str(own)}) == \
        [two, own, package_profiles_dir()]


def test_unknown_and_broken_profiles(tmp_path):
    with pytest.raises(ProfileError, match="unknown profile 'nope'.*known: .*4gbit"):
        load_profile("nope")
    bad = tmp_path / "bad.yaml"
    bad.write_text("rate: 4 gigs\n")
    with pytest.raises(ProfileError, match=r"bad\.yaml: rate: .*unit"):
        load_profile(bad)
    (tmp_path / "list.yaml").write_text("- 1\n- 2\n")
    with pytest.raises(ProfileError, match="mapping"):
        load_profile(tmp_path / "list.yaml")
    (tmp_path / "junk.yaml").write_text("rate: [\n")
    with pytest.raises(ProfileError, match="not valid YAML"):
        load_profile(tmp_path / "junk.yaml")
    with pytest.raises(ProfileError, match="missing.yaml does not exist"):
        load_profile(tmp_path / "missing.yaml")
    with pytest.raises(ProfileError, match="bad.yaml"):
        list_profiles([tmp_path])


def test_profiles_directory_has_no_stray_files():
    repo = package_profiles_dir()
    extras = {p.name for p in repo.iterdir()} - {p.name for p in repo.glob("*.yaml")} - {"README.md"}
    assert not extras
    assert Path(package_profiles_dir()).is_dir()
