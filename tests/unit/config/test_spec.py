import pytest
from hypothesis import given
from hypothesis import strategies as st

from synclab.config import SpecError, load_spec, parse_spec
from synclab.units import parse_duration_s, parse_rate_bps, parse_size_bytes


def test_defaults_and_overrides():
    s = parse_spec({}, ["cluster.workers=3", "strategy.name=wfbp", "network.rate=4gbit", "run.iterations=7"])
    assert s.cluster.workers == 3 and s.strategy.name == "wfbp" and s.run.iterations == 7
    assert s.network.rate_bps == 4_000_000_000
    assert s.n_workers == 3 and s.n_ps == 0  # wfbp needs no PS


def test_local_runs_one_process():
    s = parse_spec({"strategy": {"name": "local"}, "cluster": {"workers": 4}})
    assert s.n_workers == 1 and s.n_ps == 0


@pytest.mark.parametrize("data,key", [
    ({"cluster": {"workers": -1}}, "cluster.workers"),
    ({"cluster": {"worker": 2}}, "cluster.worker: unknown key"),
    ({"model": {"batch_size": "many"}}, "model.batch_size"),
    ({"model": {"name": "resnet9000"}}, "model.name"),
    ({"strategy": {"name": "nope"}}, "strategy.name"),
    ({"strategy": {"name": "ps", "slice_params": 5}}, "slice_params"),
    ({"optimizer": {"lr": -1}}, "optimizer.lr"),
    ({"network": {"rate": "fast"}}, "network.rate"),
    ({"network": {"delay": "-3ms"}}, "network.delay"),
    ({"run": {"iterations": 5, "warmup": 5}}, "run.warmup"),
    ({"run": {"traffic_sample_ms": 0}}, "run.traffic_sample_ms"),
    ({"strategy": {"name": "ps"}, "cluster": {"ps_shards": 0}}, "ps_shards"),
    ({"bogus": 1}, "bogus: unknown key"),
])
def test_invalid_spec_names_the_key(data, key):
    with pytest.raises(SpecError) as e:
        parse_spec(data)
    assert key in str(e.value)


def test_bad_override_and_missing_file(tmp_path):
    with pytest.raises(SpecError, match="dotted.key=value"):
        parse_spec({}, ["cluster.workers"])
    with pytest.raises(SpecError, match="does not exist"):
        load_spec(tmp_path / "missing.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("- just\n- a list\n")
    with pytest.raises(SpecError, match="mapping"):
        load_spec(bad)


def test_quickstart_example_is_valid():
    s = load_spec("examples/quickstart.yaml")
    assert s.strategy.name == "ps" and s.n_ps == 2


def test_units():
    assert parse_rate_bps("4gbit") == 4_000_000_000 and parse_rate_bps("100mbit") == 100_000_000
    assert parse_rate_bps("1kbps") == 8000  # tc: kbps = kilobytes per second
    assert parse_duration_s("20ms") == pytest.approx(0.02) and parse_duration_s(1) == 1.0
    assert parse_size_bytes("1MiB") == 1 << 20 and parse_size_bytes("64kb") == 64_000
    for bad in ("fast", "4 gigabits", "-1gbit", ""):
        with pytest.raises(ValueError):
            parse_rate_bps(bad)


@given(st.text(max_size=12))
def test_unit_parsers_raise_value_error_only(text):
    for fn in (parse_rate_bps, parse_duration_s, parse_size_bytes):
        try:
            fn(text)
        except ValueError:
            pass


def test_chunk_bytes_auto_is_4mib_unshaped_and_at_10gbit_else_1mib():
    from synclab.config.spec import Spec
    from synclab.wire.frames import auto_chunk_bytes

    assert Spec().transport.chunk_bytes == 4 << 20  # no rate: unshaped
    assert Spec(network={"profile": "unshaped"}).transport.chunk_bytes == 4 << 20
    assert Spec(network={"rate": "1gbit"}).transport.chunk_bytes == 1 << 20
    assert Spec(network={"rate": "4gbit"}).transport.chunk_bytes == 1 << 20
    assert Spec(network={"rate": "10gbit"}).transport.chunk_bytes == 4 << 20
    # the host's rate decides: 10 Gbit/s dilated by 2 runs the host's link at 5 Gbit/s
    assert Spec(network={"rate": "10gbit"}, compute={"mode": "replay"}, run={"dilation": 2}).transport.chunk_bytes \
        == 1 << 20
    assert Spec(network={"rate": "1gbit"}, transport={"chunk_bytes": "64KiB"}).transport.chunk_bytes == 64 << 10
    assert auto_chunk_bytes(None) == 4 << 20 and auto_chunk_bytes(9.99e9) == 1 << 20


def test_chunk_bytes_other_words_are_refused():
    import pytest as _pytest
    from pydantic import ValidationError

    from synclab.config.spec import Spec

    with _pytest.raises(ValidationError):
        Spec(transport={"chunk_bytes": "big"})


def test_transport_engine_defaults_to_grpc_and_accepts_tcp():
    assert parse_spec({}).transport.engine == "grpc"
    assert parse_spec({}, ["transport.engine=tcp"]).transport.engine == "tcp"


@pytest.mark.parametrize("overrides,match", [
    (["transport.engine=udp"], "transport.engine"),
    (["transport.engine=tcp", "transport.tls=true"], "engine tcp carries no TLS"),
])
def test_transport_engine_bad_values_are_clear_errors(overrides, match):
    with pytest.raises(SpecError, match=match):
        parse_spec({}, overrides)
