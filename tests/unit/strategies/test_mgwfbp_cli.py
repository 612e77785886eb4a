"""``synclab plan mgwfbp``: the answer of issue 4 item 9 from a model profile, and clear refusals."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from synclab.cli.plan import app
from synclab.plans.mgwfbp import CostModel, algorithm1, iteration_time, optimal_plan, wfbp_plan

PROFILE = {
    "model": "toy", "batch_size": 32, "device": "cpu", "dtype": "float32",
    "forward_seconds": 0.01, "backward_seconds": 0.0072,
    "tensors": [
        {"name": "conv.weight", "params": 1000, "forward_seconds": 0.004, "backward_seconds": 0.002, "kind": "conv"},
        {"name": "conv.bias", "params": 10, "forward_seconds": 0.001, "backward_seconds": 0.0001, "kind": "conv"},
        {"name": "fc.weight", "params": 100000, "forward_seconds": 0.004, "backward_seconds": 0.005, "kind": "fc"},
        {"name": "fc.bias", "params": 100, "forward_seconds": 0.001, "backward_seconds": 0.0001, "kind": "fc"},
    ],
    "boundary": {"activations_per_sample": 10, "conv_params": 1010, "fc_params": 100100,
                 "conv_seconds": 0.01, "fc_seconds": 0.002},
}
A, B = 1e-3, 1e-9


def _plan(tmp_path, profile, *args):
    path = tmp_path / "profile.json"
    path.write_text(profile if isinstance(profile, str) else json.dumps(profile))
    return CliRunner().invoke(app, ["mgwfbp", "--profile", str(path), *args])


@pytest.mark.parametrize("algorithm, find", [("paper", algorithm1), ("optimal", optimal_plan)])
def test_answer_follows_the_cost_model_with_4_bytes_per_param(tmp_path, algorithm, find):
    r = _plan(tmp_path, PROFILE, "--a", str(A), "--b", str(B), "--algorithm", algorithm, "--json")
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert set(got) == {"merged", "groups", "iteration_seconds"}
    t_b = [t["backward_seconds"] for t in PROFILE["tensors"]]
    sizes = [4 * t["params"] for t in PROFILE["tensors"]]
    cost = CostModel(A, B)
    plan = find(0.01, t_b, sizes, cost)
    assert got["merged"] == list(plan.merged_flags())
    assert got["groups"] == [list(g) for g in plan.groups]
    assert got["iteration_seconds"] == pytest.approx({
        "wfbp": iteration_time(wfbp_plan(4), 0.01, t_b, sizes, cost),
        "synceasgd": 0.01 + sum(t_b) + A + B * sum(sizes),  # eq. 9
        "mgwfbp": iteration_time(plan, 0.01, t_b, sizes, cost),
    })


def test_this_profile_sends_fc_weight_with_conv_bias(tmp_path):
    r = _plan(tmp_path, PROFILE, "--a", str(A), "--b", str(B), "--json")
    got = json.loads(r.stdout)
    assert got["merged"] == [False, False, True, False]
    assert got["groups"] == [[3], [2, 1], [0]]
    times = got["iteration_seconds"]
    assert times["mgwfbp"] < min(times["wfbp"], times["synceasgd"])


def test_paper_is_the_default_and_optimal_is_never_worse(tmp_path):
    default = json.loads(_plan(tmp_path, PROFILE, "--a", "0.002", "--b", "1e-8", "--json").stdout)
    paper = json.loads(_plan(tmp_path, PROFILE, "--a", "0.002", "--b", "1e-8", "--algorithm", "paper",
                             "--json").stdout)
    best = json.loads(_plan(tmp_path, PROFILE, "--a", "0.002", "--b", "1e-8", "--algorithm", "optimal",
                            "--json").stdout)
    assert default == paper
    assert best["iteration_seconds"]["mgwfbp"] <= paper["iteration_seconds"]["mgwfbp"] + 1e-15


def test_huge_start_up_cost_gives_one_message(tmp_path):
    got = json.loads(_plan(tmp_path, PROFILE, "--a", "10", "--b", "0", "--json").stdout)
    assert got["groups"] == [[3, 2, 1, 0]]
    assert got["iteration_seconds"]["mgwfbp"] == pytest.approx(got["iteration_seconds"]["synceasgd"])


def test_text_output_lists_tensors_and_times(tmp_path):
    r = _plan(tmp_path, PROFILE, "--a", str(A), "--b", str(B))
    assert r.exit_code == 0
    assert "fc.weight" in r.stdout and "synceasgd" in r.stdout and "3 all-reduce(s)" in r.stdout


def _without(key, index=None):
    data = json.loads(json.dumps(PROFILE))
    if index is None:
        del data[key]
    else:
        del data["tensors"][index][key]
    return data


@pytest.mark.parametrize("profile, field", [
    (_without("forward_seconds"), "forward_seconds: missing"),
    (_without("tensors"), "tensors: missing"),
    (_without("params", 2), "tensors.2.params: missing"),
    (_without("backward_seconds", 0), "tensors.0.backward_seconds: missing"),
    (_without("kind", 1), "tensors.1.kind: missing"),            # the whole format is checked, not just t_b
    ({**PROFILE, "tensors": []}, "tensors:"),
    ({**PROFILE, "forward_seconds": -1}, "forward_seconds:"),
    ({**PROFILE, "forward_seconds": "fast"}, "forward_seconds:"),
    ({**PROFILE, "tensors": [{**PROFILE["tensors"][0], "params": 2.5}]}, "tensors.0.params:"),
    ({**PROFILE, "backward_seconds": 1.0}, "backward_seconds is 1 but the tensors' backward_seconds sum to 0.0072"),
    ("[1, 2]", "a model profile is a JSON object"),
    ("{not json", "is not JSON"),
])
def test_malformed_profile_exits_2_naming_the_field(tmp_path, profile, field):
    r = _plan(tmp_path, profile, "--a", str(A), "--b", str(B), "--json")
    assert r.exit_code == 2
    assert field in r.stderr and "profile.json" in r.stderr


def test_missing_profile_exits_2(tmp_path):
    r = CliRunner().invoke(app, ["mgwfbp", "--profile", str(tmp_path / "none.json"), "--a", "0", "--b", "0"])
    assert r.exit_code == 2 and "cannot read profile" in r.stderr and "none.json" in r.stderr


def test_negative_cost_exits_2_naming_the_option(tmp_path):
    r = _plan(tmp_path, PROFILE, "--a", "-1", "--b", str(B), "--json")
    assert r.exit_code == 2 and "--a" in r.stderr
