"""Stanza's node assignment (eq. 2-5), model profiles, options and plan — pure, no processes."""

import json
import math
import random

import pytest
from pydantic import ValidationError

from synclab.compute.profile import ModelProfileError
from synclab.core import ParamInfo
from synclab.plans.stanza import StanzaProfile, choose_fc_workers
from synclab.strategies.stanza import (
    Stanza,
    StanzaOptions,
    conv_groups,
    read_profile,
    split_params,
)

PROFILE_JSON = {
    "model": "alexnet", "batch_size": 128, "device": "cuda", "dtype": "float32",
    "forward_seconds": 0.05, "backward_seconds": 0.1,
    "tensors": [{"name": "features.0.weight", "params": 2_300_000, "forward_seconds": 0.045,
                 "backward_seconds": 0.075, "kind": "conv"},
                {"name": "classifier.0.weight", "params": 58_800_000, "forward_seconds": 0.005,
                 "backward_seconds": 0.025, "kind": "fc"}],
    "boundary": {"activations_per_sample": 9216, "conv_params": 2_300_000, "fc_params": 58_800_000,
                 "conv_seconds": 0.12, "fc_seconds": 0.01},
}
STANZA_ONLY = {"batch_size": 128, "boundary": PROFILE_JSON["boundary"]}


def written(tmp_path, data, name="profile.json"):
    path = tmp_path / name
    path.write_text(json.dumps(data))
    return path


@pytest.fixture
def profile_path(tmp_path):
    return written(tmp_path, PROFILE_JSON)


def eq4_throughput(n_c: int, n_f: int, p: StanzaProfile, ceil_rounds: bool = False) -> float:
    """Eq. 2-4 written out again, from the paper's symbols, with B in values per second."""
    B = p.bandwidth_bps / (8 * p.bytes_per_value)
    A, K, P_c, T_c, T_f = p.activations, p.batch_size, p.conv_params, p.conv_time_s, p.fc_time_s
    t_c = T_c + n_c / n_f * T_f                                                    # eq. 2
    log = math.log2(n_c)
    off = math.ceil(log) if ceil_rounds else math.floor(log)                       # eq. 3 prints ceil, §4.1.2 floor
    rounds = log if log.is_integer() else off + 2
    t_s = t_c + 2 * n_c * A * K / (n_f * B) + P_c * rounds / B                     # eq. 3
    return n_c * K / t_s                                                           # eq. 4


def brute_force(total: int, p: StanzaProfile, as_printed: bool = False) -> int:
    """argmax of eq. 4 over the splits n_c + n_f = N (the algorithm's reading: every FC worker serves a CONV
    worker; as printed: any split); ties: fewest FC."""
    splits = [(n_c, total - n_c) for n_c in range(1, total) if as_printed or total - n_c <= n_c]
    best = max(eq4_throughput(n_c, n_f, p, as_printed) for n_c, n_f in splits)
    return min(n_f for n_c, n_f in splits
               if math.isclose(eq4_throughput(n_c, n_f, p, as_printed), best, rel_tol=1e-12))


def random_profile(rng: random.Random) -> StanzaProfile:
    return StanzaProfile(conv_time_s=rng.uniform(0.001, 1.0), fc_time_s=rng.uniform(0.0, 0.5),
                         activations=rng.randint(1, 50_000), batch_size=rng.choice([1, 16, 32, 128, 256]),
                         conv_params=rng.randint(0, 30_000_000), bandwidth_bps=rng.choice([1e9, 2.6e9, 1e10, 1e11]))


def test_assignment_is_the_brute_force_maximum_of_eq_4_in_either_reading():
    rng = random.Random(4)
    differ = 0
    for _ in range(300):
        profile = random_profile(rng)
        total = rng.randint(2, 40)
        algorithm = choose_fc_workers(total, profile)
        assert algorithm == brute_force(total, profile), (total, profile)
        printed = choose_fc_workers(total, profile, reading="as-printed")
        assert printed == brute_force(total, profile, as_printed=True), (total, profile)
        differ += algorithm != printed
    assert differ < 300  # the readings mostly agree; where they differ is what strategy.reading chooses


def test_the_readings_differ_only_off_powers_of_two_or_by_an_idle_fc_worker():
    # A split with n_c a power of two costs the same in both readings and every other split costs at least as
    # much as printed: when the algorithm picks a power of two, the printed reading picks it too, or an n_f > n_c.
    rng = random.Random(7)
    for _ in range(300):
        profile, total = random_profile(rng), rng.randint(2, 40)
        n_f = choose_fc_workers(total, profile)
        n_c = total - n_f
        if n_c & (n_c - 1) == 0:
            printed = choose_fc_workers(total, profile, reading="as-printed")
            assert printed == n_f or printed > total - printed, (total, profile)


def test_an_fc_worker_without_conv_workers_is_never_chosen():
    # FC-heavy: eq. 5 alone prefers 1 CONV + 2 FC workers, counting T_f/2 for an FC worker that has nothing to do
    profile = StanzaProfile(conv_time_s=0.01, fc_time_s=1.0, activations=1, batch_size=1, conv_params=1,
                            bandwidth_bps=1e12)
    assert choose_fc_workers(3, profile, reading="as-printed") == 2
    assert choose_fc_workers(3, profile) == 1


def test_a_printed_choice_that_cannot_run_is_refused(tmp_path):
    fc_heavy = {**PROFILE_JSON, "batch_size": 1,
                "boundary": {"activations_per_sample": 1, "conv_params": 1, "fc_params": 10, "conv_seconds": 0.01,
                             "fc_seconds": 1.0}}
    path = written(tmp_path, fc_heavy)
    params = [ParamInfo(0, "features.0.weight", (1,), 1, 0), ParamInfo(1, "classifier.0.weight", (10,), 10, 1)]
    with pytest.raises(ValueError, match="each FC worker needs at least one CONV worker"):
        Stanza.make_plan(params, ps_shards=0, workers=3, seed=0,
                         options=StanzaOptions(profile=path, bandwidth="1tbit", reading="as-printed"))
    with pytest.raises(ValidationError, match="reading"):
        StanzaOptions(fc_workers=1, reading="verbatim")


def test_conv_groups_are_contiguous_and_as_equal_as_possible():
    assert conv_groups(4, 2) == [range(0, 2), range(2, 4)]
    assert conv_groups(5, 2) == [range(0, 3), range(3, 5)]
    assert conv_groups(3, 1) == [range(0, 3)]
    for n_c in range(1, 12):
        for n_f in range(1, n_c + 1):
            groups = conv_groups(n_c, n_f)
            assert [r for g in groups for r in g] == list(range(n_c))
            assert max(map(len, groups)) - min(map(len, groups)) <= 1 and min(map(len, groups)) >= 1


def test_profile_fields_are_read(profile_path):
    b = read_profile(profile_path)
    assert b.batch_size == 128 and b.boundary.fc_params == 58_800_000
    s = b.stanza(1e9)
    assert (s.conv_time_s, s.fc_time_s, s.activations, s.batch_size) == (0.12, 0.01, 9216, 128)
    assert s.conv_params == 2_300_000
    ps = b.ps(1e9)
    assert ps.params == 61_100_000 and ps.compute_time_s == pytest.approx(0.13) and ps.batch_size == 128


@pytest.mark.parametrize("path, value, field", [
    (("batch_size",), 0, "batch_size"),
    (("batch_size",), 1.5, "batch_size"),
    (("boundary",), [1], "boundary"),
    (("boundary", "activations_per_sample"), "many", "boundary.activations_per_sample"),
    (("boundary", "conv_params"), -1, "boundary.conv_params"),
    (("boundary", "fc_params"), True, "boundary.fc_params"),
    (("boundary", "conv_seconds"), -0.1, "boundary.conv_seconds"),
    (("boundary", "fc_seconds"), float("nan"), "boundary.fc_seconds"),
])
@pytest.mark.parametrize("partial", [False, True])
def test_a_bad_profile_field_is_named_with_the_file(tmp_path, path, value, field, partial):
    data = json.loads(json.dumps(PROFILE_JSON if not partial else STANZA_ONLY))
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(ModelProfileError, match=f"bad.json: {field}: "):
        read_profile(written(tmp_path, data, "bad.json"), partial=partial)


@pytest.mark.parametrize("missing", ["batch_size", "boundary", "boundary.conv_seconds"])
def test_a_missing_profile_field_is_named(tmp_path, missing):
    data = json.loads(json.dumps(PROFILE_JSON))
    if "." in missing:
        del data["boundary"][missing.split(".")[1]]
    else:
        del data[missing]
    with pytest.raises(ModelProfileError, match=f"{missing}: missing"):
        read_profile(written(tmp_path, data))


def test_a_partial_profile_only_when_asked(tmp_path):
    path = written(tmp_path, STANZA_ONLY)
    with pytest.raises(ModelProfileError, match="model: missing"):
        read_profile(path)
    assert read_profile(path, partial=True).stanza(1e9) == read_profile(written(tmp_path, PROFILE_JSON, "whole.json")).stanza(1e9)
    with pytest.raises(ModelProfileError, match="batch_size: missing"):
        read_profile(written(tmp_path, {"boundary": PROFILE_JSON["boundary"]}), partial=True)


def test_profile_files_that_cannot_be_read(tmp_path):
    with pytest.raises(ModelProfileError, match="cannot read profile"):
        read_profile(tmp_path / "absent.json")
    (tmp_path / "p.json").write_text("{not json")
    with pytest.raises(ModelProfileError, match="is not JSON"):
        read_profile(tmp_path / "p.json")


def test_options_need_fc_workers_or_a_profile_and_bandwidth(profile_path):
    path = profile_path
    assert StanzaOptions(fc_workers=2).fc_workers == 2
    assert StanzaOptions(profile=path, bandwidth="10gbit").profile == path
    with pytest.raises(ValidationError, match="strategy.fc_workers, or strategy.profile and strategy.bandwidth"):
        StanzaOptions(profile=path)
    with pytest.raises(ValidationError, match="fc_workers"):
        StanzaOptions(fc_workers=0)
    with pytest.raises(ValidationError, match="bandwidth"):
        StanzaOptions(fc_workers=1, bandwidth="fast")
    with pytest.raises(ValidationError, match="extra"):
        StanzaOptions(fc_workers=1, conv_workers=3)


def cnn_params() -> list[ParamInfo]:
    names = ["features.0.weight", "features.0.bias", "features.3.weight", "features.3.bias",
             "classifier.0.weight", "classifier.0.bias", "classifier.2.weight", "classifier.2.bias"]
    return [ParamInfo(i, n, (10,), 10, i // 2) for i, n in enumerate(names)]


def test_split_params_finds_the_boundary_and_refuses_models_without_one():
    assert split_params(cnn_params()) == 4
    mlp = [ParamInfo(i, f"layers.{i}.weight", (4,), 4, i) for i in range(3)]
    with pytest.raises(ValueError, match="'layers.0.weight' does not fit"):
        split_params(mlp)
    only_conv = [p for p in cnn_params() if p.name.startswith("features")]
    with pytest.raises(ValueError, match="both a CONV part"):
        split_params(only_conv)
    shuffled = [ParamInfo(i, p.name, p.shape, p.numel, p.layer) for i, p in enumerate(reversed(cnn_params()))]
    with pytest.raises(ValueError, match="does not fit"):
        split_params(shuffled)


def test_plan_with_fixed_fc_workers():
    plan = Stanza.make_plan(cnn_params(), ps_shards=0, workers=5, seed=0, options=StanzaOptions(fc_workers=2))
    assert (plan.conv_workers, plan.fc_workers, plan.boundary) == (3, 2, 4)
    assert plan.assigned_by == "strategy.fc_workers"
    assert type(plan).model_validate_json(plan.model_dump_json()) == plan  # published through the coordinator as JSON
    with pytest.raises(ValueError, match="each FC worker needs at least one"):
        Stanza.make_plan(cnn_params(), ps_shards=0, workers=3, seed=0, options=StanzaOptions(fc_workers=2))
    with pytest.raises(ValueError, match="at least 2 workers"):
        Stanza.make_plan(cnn_params(), ps_shards=0, workers=1, seed=0, options=StanzaOptions(fc_workers=1))


def test_plan_from_the_profile_solves_eq_5(profile_path):
    options = StanzaOptions(profile=profile_path, bandwidth="10gbit")
    plan = Stanza.make_plan(cnn_params(), ps_shards=0, workers=11, seed=0, options=options)
    profile = read_profile(profile_path).stanza(10e9)
    n_f = brute_force(11, profile)
    assert (plan.conv_workers, plan.fc_workers) == (11 - n_f, n_f)
    assert plan.assigned_by == "eq. 2-5"
    assert plan.predicted_throughput_samples_per_s == pytest.approx(eq4_throughput(11 - n_f, n_f, profile))
    assert type(plan).model_validate_json(plan.model_dump_json()) == plan


def test_plan_names_a_bad_profile_field(tmp_path):
    data = json.loads(json.dumps(PROFILE_JSON))
    data["boundary"]["fc_seconds"] = "fast"
    options = StanzaOptions(profile=written(tmp_path, data), bandwidth="1gbit")  # only rank 0 reads it, in make_plan
    with pytest.raises(ModelProfileError, match="strategy.profile: .*profile.json: boundary.fc_seconds"):
        Stanza.make_plan(cnn_params(), ps_shards=0, workers=4, seed=0, options=options)
