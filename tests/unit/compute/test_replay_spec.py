"""Replay and dilation in the spec: bad values are refused naming the key; the launcher inlines the profile."""

from __future__ import annotations

import json

import pytest

from synclab.compute.profile import parse_model_profile
from synclab.compute.profiler import measure_profile
from synclab.config import SpecError, parse_spec
from synclab.config.resolve import resolve_compute
from synclab.linkprofile import profile_from_mapping
from synclab.netem.dilation import dilate
from synclab.netem.profile import load_profile
from synclab.roles.network import node_profile
from synclab.transport.shaper import profile_bucket


@pytest.fixture(scope="module")
def mlp_profile(tmp_path_factory):
    p = measure_profile("mlp", batch_size=8, iterations=2, warmup=1)
    path = tmp_path_factory.mktemp("prof") / "mlp.json"
    path.write_text(p.to_json())
    return path


def test_profiler_output_is_a_valid_profile_that_fits_the_model(mlp_profile):
    p = parse_model_profile(json.loads(mlp_profile.read_text()))
    assert p.model == "mlp" and p.batch_size == 8 and p.boundary is None
    assert p.forward_seconds > 0 and p.backward_seconds > 0
    assert p.forward_seconds == pytest.approx(sum(t.forward_seconds for t in p.tensors))
    assert {"device_name", "torch", "date", "iterations"} <= set(p.meta)
    assert set(p.spread) == {"forward_seconds", "backward_seconds", "update_seconds"}
    assert p.update_seconds is not None and p.update_seconds > 0
    shares = p.update_shares()
    assert shares[0] / shares[1] == pytest.approx(p.tensors[0].params / p.tensors[1].params)
    assert sum(shares) == pytest.approx(p.update_seconds)


def test_profiler_measures_the_stanza_boundary_of_a_cnn():
    p = measure_profile("smallcnn", batch_size=4, iterations=1, warmup=0)
    b = p.boundary
    assert b is not None and b.activations_per_sample == 4096  # 256 channels x 4 x 4 after the last pooling
    assert b.conv_params + b.fc_params == p.params
    assert b.conv_seconds + b.fc_seconds == pytest.approx(p.iteration_seconds)
    assert {t.kind for t in p.tensors} == {"conv", "fc"}


@pytest.mark.parametrize("override, key", [
    (["run.dilation=0"], "run.dilation"),
    (["run.dilation=-2"], "run.dilation"),
    (["run.dilation=2"], "run.dilation"),                   # real compute cannot be dilated
    (["compute.scale=0"], "compute.scale"),
    (["compute.profile=x.json"], "compute.profile"),        # only with replay
    (["compute.mode=replay", "compute.profile=/nonexistent.json"], "compute.profile"),
    (["compute.mode=quantum"], "compute.mode"),
])
def test_bad_replay_settings_name_the_key(override, key):
    with pytest.raises(SpecError, match=key.replace(".", r"\.")):
        parse_spec({"model": {"name": "mlp"}}, override)


def test_a_profile_of_another_model_is_refused(mlp_profile):
    with pytest.raises(SpecError, match=r"compute\.profile:.*'mlp'.*'smallcnn'"):
        parse_spec({"model": {"name": "smallcnn"}, "compute": {"mode": "replay", "profile": str(mlp_profile)}})


def test_resolve_inlines_the_profile_and_takes_its_batch(mlp_profile):
    s = parse_spec({"model": {"name": "mlp", "batch_size": 32},
                    "compute": {"mode": "replay", "profile": str(mlp_profile), "scale": 2}})
    s2, notes = resolve_compute(s)
    assert isinstance(s2.compute.profile, dict) and s2.model.batch_size == 8
    assert any("batch size 8" in n for n in notes) and any("x2" in n for n in notes)
    again, _ = resolve_compute(s2)
    assert again.compute.profile == s2.compute.profile


def test_dilation_divides_rates_and_stretches_delays():
    p = profile_from_mapping({"name": "x", "rate": "4gbit", "delay": "2ms", "jitter": "1ms", "loss": "1%",
                              "burst": "1MB", "roles": {"ps": {"rate": "2gbit"}}})
    d = dilate(p, 4)
    assert (d.rate_bps, d.delay_s, d.jitter_s, d.loss_pct, d.burst_bytes) == (10**9, 0.008, 0.004, 1.0, 10**6)
    assert profile_bucket(d).queue_bytes == profile_bucket(p).queue_bytes  # buffers keep their bytes
    assert d.roles["ps"].rate_bps == 500_000_000
    plain = profile_from_mapping({"name": "y", "rate": "1gbit"})
    assert profile_bucket(dilate(plain, 8)).queue_bytes == profile_bucket(plain).queue_bytes  # derived from the emulated rate
    assert dilate(p, 1) is p


def test_a_derived_burst_under_dilation_comes_from_the_host_rate():
    """8 ms of the emulated 10 Gbit/s (10 MB) kept in bytes would pass whole messages for free at R/D."""
    ten = profile_from_mapping({"name": "t", "rate": "10gbit"})
    d = dilate(ten, 32)
    assert d.burst_bytes is None
    assert profile_bucket(d).burst_bytes == max(64 << 10, int(10**10 / 32 / 8 * 0.004))  # 4 ms of 312.5 Mbit/s
    assert profile_bucket(d).burst_bytes < profile_bucket(ten).burst_bytes / 30
    assert profile_bucket(d).queue_bytes == profile_bucket(ten).queue_bytes
    # a configured burst keeps its bytes, but not below what the kernel needs at the host rate
    small = profile_from_mapping({"name": "s", "rate": "10gbit", "burst": "64KiB"})
    assert dilate(small, 32).burst_bytes == profile_bucket(d, kernel=True).burst_bytes > 64 << 10
    big = profile_from_mapping({"name": "b", "rate": "10gbit", "burst": "4MB"})
    assert dilate(big, 32).burst_bytes == 4 * 10**6
    s = parse_spec({"network": {"profile": "4gbit"}, "compute": {"mode": "replay"}, "run": {"dilation": 2}})
    assert node_profile(s, "worker").rate_bps == load_profile("4gbit").rate_bps // 2


def test_keepalive_stretches_with_dilation(monkeypatch):
    from synclab.transport import node
    from synclab.wire import channels

    opts = dict(channels.channel_options(keepalive_scale=4))
    assert opts["grpc.keepalive_timeout_ms"] == 4 * channels.KEEPALIVE_TIMEOUT_MS
    assert opts["grpc.http2.ping_timeout_ms"] == opts["grpc.keepalive_timeout_ms"]  # grpc/grpc#34647
    assert dict(channels.server_options(keepalive_scale=4))["grpc.keepalive_time_ms"] == 4 * channels.KEEPALIVE_TIME_MS
    assert dict(channels.channel_options())["grpc.keepalive_time_ms"] == channels.KEEPALIVE_TIME_MS  # no state kept
    with pytest.raises(ValueError):
        channels.channel_options(keepalive_scale=0)
    # a node's data-plane server and channels get the scale it was made with (run.dilation in worker and ps)
    seen = []
    monkeypatch.setattr(node, "make_server", lambda *a, **kw: seen.append(kw["keepalive_scale"]) or _NoServer())
    node.NodeTransport("w0", "t0ken", on_message=lambda m: None, keepalive_scale=4).serve("127.0.0.1")
    assert seen == [4]


class _NoServer:
    def add_insecure_port(self, address):
        return 1

    def start(self):
        pass
