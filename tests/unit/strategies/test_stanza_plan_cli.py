"""``synclab plan stanza``: the answer of eq. 2-7 from a profile, and exit 2 naming a bad field."""

import json

import pytest
import typer
from typer.testing import CliRunner

from synclab.cli.plan_stanza import plan_stanza
from synclab.plans.stanza import (
    PsProfile,
    StanzaProfile,
    ps_iteration_time,
    stanza_iteration_time,
)

PROFILE = {
    "model": "alexnet", "batch_size": 128, "device": "cuda", "dtype": "float32",
    "forward_seconds": 0.05, "backward_seconds": 0.1,
    "tensors": [{"name": "features.0.weight", "params": 2_300_000, "forward_seconds": 0.045,
                 "backward_seconds": 0.075, "kind": "conv"},
                {"name": "classifier.0.weight", "params": 58_800_000, "forward_seconds": 0.005,
                 "backward_seconds": 0.025, "kind": "fc"}],
    "boundary": {"activations_per_sample": 9216, "conv_params": 2_300_000, "fc_params": 58_800_000,
                 "conv_seconds": 0.12, "fc_seconds": 0.01},
}


@pytest.fixture
def cli():
    app = typer.Typer()
    plan = typer.Typer()
    app.add_typer(plan, name="plan")  # the way `synclab plan` mounts it
    plan.command("stanza")(plan_stanza)
    runner = CliRunner()
    return lambda *args: runner.invoke(app, ["plan", "stanza", *map(str, args)])


@pytest.fixture
def profile_path(tmp_path):
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(PROFILE))
    return path


def test_json_answer_follows_eq_2_to_7(cli, profile_path):
    r = cli("--profile", profile_path, "--nodes", 11, "--bandwidth", "10gbit", "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    assert set(got) == {"conv_workers", "fc_workers", "reading", "iteration_seconds", "throughput_samples_per_s", "ps"}
    assert set(got["ps"]) == {"workers", "servers", "iteration_seconds", "throughput_samples_per_s"}
    assert got["conv_workers"] + got["fc_workers"] == 11 and got["ps"]["workers"] + got["ps"]["servers"] == 11
    stanza = StanzaProfile(conv_time_s=0.12, fc_time_s=0.01, activations=9216, batch_size=128,
                           conv_params=2_300_000, bandwidth_bps=10e9)
    t_s = stanza_iteration_time(got["conv_workers"], got["fc_workers"], stanza)
    assert got["iteration_seconds"] == pytest.approx(t_s)
    assert got["throughput_samples_per_s"] == pytest.approx(got["conv_workers"] * 128 / t_s)
    # the best split: no other one has a higher eq. 4 throughput (with n_f <= n_c)
    best = max(n_c * 128 / stanza_iteration_time(n_c, 11 - n_c, stanza) for n_c in range(6, 11))
    assert got["throughput_samples_per_s"] == pytest.approx(best)
    ps = PsProfile(compute_time_s=0.13, params=61_100_000, batch_size=128, bandwidth_bps=10e9)
    t_ps = ps_iteration_time(got["ps"]["workers"], got["ps"]["servers"], ps)
    assert got["ps"]["iteration_seconds"] == pytest.approx(t_ps)
    assert got["ps"]["throughput_samples_per_s"] == pytest.approx(
        max(n_w * 128 / ps_iteration_time(n_w, 11 - n_w, ps) for n_w in range(1, 11)))


def test_4_byte_values_from_a_partial_profile(cli, tmp_path):
    # 32 bit/s moves one 4-byte value per second: times can be read off the formulas by hand
    profile = {"batch_size": 3, "boundary": {"activations_per_sample": 2, "conv_params": 5, "fc_params": 7,
                                             "conv_seconds": 10.0, "fc_seconds": 1.0}}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(profile))
    got = json.loads(cli("--profile", path, "--nodes", 2, "--bandwidth", "32bit", "--json", "--partial").output)
    # n_c = n_f = 1: t_s = 10 + 1 + 2*1*2*3 + 5*0 = 23
    assert (got["conv_workers"], got["fc_workers"], got["iteration_seconds"]) == (1, 1, 23.0)
    # n_w = n_s = 1: t_ps = 2*1*12/1 + 11 = 35
    assert (got["ps"]["workers"], got["ps"]["servers"], got["ps"]["iteration_seconds"]) == (1, 1, 35.0)


def test_a_partial_profile_needs_the_flag_and_still_batch_size_and_boundary(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"batch_size": 3, "boundary": PROFILE["boundary"]}))
    r = cli("--profile", path, "--nodes", 4, "--bandwidth", "1gbit")
    assert r.exit_code == 2 and "p.json" in r.output and "model: missing" in r.output and "--partial" in r.output
    path.write_text(json.dumps({"boundary": PROFILE["boundary"]}))
    r = cli("--profile", path, "--nodes", 4, "--bandwidth", "1gbit", "--partial")
    assert r.exit_code == 2 and "p.json: batch_size: missing" in r.output
    path.write_text(json.dumps({"batch_size": 3, "boundary": PROFILE["boundary"], "forward_seconds": "fast"}))
    r = cli("--profile", path, "--nodes", 4, "--bandwidth", "1gbit", "--partial")
    assert r.exit_code == 2 and "p.json: forward_seconds:" in r.output  # what is there is checked


def test_human_readable_by_default(cli, profile_path):
    r = cli("--profile", profile_path, "--nodes", 4, "--bandwidth", "1gbit")
    assert r.exit_code == 0 and "CONV" in r.output and "servers" in r.output


@pytest.mark.parametrize("field, value", [("boundary.conv_seconds", "slow"), ("batch_size", -3),
                                          ("boundary.activations_per_sample", None)])
def test_malformed_profile_exits_2_naming_the_field(cli, tmp_path, field, value):
    data = json.loads(json.dumps(PROFILE))
    target, key = (data["boundary"], field.split(".")[1]) if "." in field else (data, field)
    if value is None:
        del target[key]
    else:
        target[key] = value
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(data))
    r = cli("--profile", path, "--nodes", 4, "--bandwidth", "1gbit")
    assert r.exit_code == 2
    assert f"bad.json: {field}: " in r.output


@pytest.mark.parametrize("args, message", [
    (("--nodes", 1, "--bandwidth", "1gbit"), "--nodes"),
    (("--nodes", 4, "--bandwidth", "quick"), "--bandwidth"),
    (("--nodes", 4, "--bandwidth", "0"), "--bandwidth"),
])
def test_bad_arguments_exit_2(cli, profile_path, args, message):
    r = cli("--profile", profile_path, *args)
    assert r.exit_code == 2 and message in r.output


def test_missing_profile_file_exits_2(cli, tmp_path):
    r = cli("--profile", tmp_path / "absent.json", "--nodes", 4, "--bandwidth", "1gbit")
    assert r.exit_code == 2 and "cannot read profile" in r.output
