"""The argmax claim: where a swept metric peaks, compared with where the paper saw its peak."""

from synclab.reproduce.schema import Claim
from synclab.reproduce.verdict import NOT, NOT_RUN, PARTLY, REPRODUCED, TIE, judge

SIZES = [5000, 20000, 50000, 200000, 1000000]


def _claim(**judge_):
    return Claim.model_validate({
        "id": "peak", "quote": "reaches a peak at 50,000", "source": "P3 §5.5", "paper_value": 50000,
        "kind": "argmax", "over": "strategy.slice_params",
        "value": {"where": {"strategy.name": "p3"}, "metric": "throughput"},
        "judge": {"within": 0.01, "partly_factor": 4.1, **judge_}})


def _rows(throughputs, sizes=SIZES):
    return [{"strategy.name": "p3", "strategy.slice_params": str(s), "throughput": t}
            for s, t in zip(sizes, throughputs)]


def test_peak_where_the_paper_saw_it_is_reproduced():
    out = judge(_claim(), _rows([80, 95, 100, 97, 60]))
    assert out["synclab_value"] == 50000 and out["verdict"] == REPRODUCED


def test_peak_one_step_away_is_partly_and_far_away_not():
    assert judge(_claim(), _rows([80, 90, 95, 100, 60]))["verdict"] == PARTLY   # 200,000: 4x
    assert judge(_claim(), _rows([80, 90, 95, 90, 100]))["verdict"] == NOT      # 1,000,000: 20x


def test_a_peak_leading_by_less_than_the_3_percent_floor_is_flat():
    out = judge(_claim(), _rows([80, 95, 99, 100, 60]))  # no margin given: 1 % lead is under the 3 % floor
    assert out["verdict"] == NOT and "no peak" in out["why"] and out["margin"] == 0.03


def test_fewer_than_three_points_cannot_show_a_peak():
    assert judge(_claim(), _rows([80, 95], SIZES[:2]))["verdict"] == NOT_RUN
    other = [{**r, "strategy.name": "ps"} for r in _rows([1, 2, 3, 4, 5])]
    assert judge(_claim(), other)["verdict"] == NOT_RUN


def test_argmax_needs_its_axis():
    import pytest

    with pytest.raises(ValueError, match="'over'"):
        Claim.model_validate({"id": "x", "quote": "q", "source": "s", "paper_value": 1, "kind": "argmax",
                              "value": {"where": {"a": 1}, "metric": "m"}})


def test_a_bad_override_exits_2_naming_the_key(tmp_path, monkeypatch):
    from pathlib import Path

    from typer.testing import CliRunner

    from synclab.cli import app

    monkeypatch.chdir(Path(__file__).resolve().parents[3])
    r = CliRunner().invoke(app, ["reproduce", "p3-fig12-resnet50", "--quick", "--out", str(tmp_path),
                                 "--set", "strategy.nonsense=1"])
    assert r.exit_code == 2 and "nonsense" in r.output
    assert not (tmp_path / "points.csv").exists()


def test_a_peak_within_the_margin_is_a_flat_curve():
    out = judge(_claim(margin=0.05), _rows([97, 99, 100, 98, 96]))
    assert out["verdict"] == NOT and "no peak" in out["why"] and out["synclab_value"] == 50000
    assert judge(_claim(margin=0.05), _rows([80, 90, 100, 90, 60]))["verdict"] == REPRODUCED


def _direction_claim(direction, margin=0.05):
    return Claim.model_validate({
        "id": "idle", "quote": "the network idle time has been considerably lowered with P3", "source": "P3 §5.3",
        "paper_value": 1.0, "kind": "ratio",
        "num": {"where": {"strategy.name": "p3"}, "metric": "idle"},
        "den": {"where": {"strategy.name": "ps"}, "metric": "idle"},
        "judge": {"direction": direction, "margin": margin}})


def _pair(p3, ps):
    return [{"strategy.name": "p3", "idle": p3}, {"strategy.name": "ps", "idle": ps}]


def test_a_direction_claim_needs_the_value_past_the_noise_margin():
    assert judge(_direction_claim("below"), _pair(0.5, 1.0))["verdict"] == REPRODUCED
    assert judge(_direction_claim("below"), _pair(0.98, 1.0))["verdict"] == TIE      # right way, inside 5 %
    assert judge(_direction_claim("below"), _pair(1.02, 1.0))["verdict"] == TIE      # wrong way, inside 5 %
    assert judge(_direction_claim("below"), _pair(1.2, 1.0))["verdict"] == NOT
    assert judge(_direction_claim("above"), _pair(1.2, 1.0))["verdict"] == REPRODUCED
    assert judge(_direction_claim("above"), _pair(0.5, 1.0))["verdict"] == NOT


def _growth(**judge_):
    def sel(n, s):
        return {"where": {"cluster.workers": n, "strategy.name": s}, "metric": "iteration_s"}
    return Claim.model_validate({
        "id": "grows", "quote": "the savings are more salient when the cluster grows", "source": "Stanza §6.2",
        "paper_value": 1.0, "kind": "ratio_growth", "num": sel(4, "ps"), "den": sel(4, "stanza"),
        "base_num": sel(2, "ps"), "base_den": sel(2, "stanza"), "judge": {"direction": "above", **judge_}})


def _times(ps2, st2, ps4, st4):
    return [{"cluster.workers": n, "strategy.name": s, "iteration_s": t}
            for n, s, t in ((2, "ps", ps2), (2, "stanza", st2), (4, "ps", ps4), (4, "stanza", st4))]


def test_ratio_growth_is_the_ratio_of_two_ratios():
    out = judge(_growth(margin=0.05), _times(1.68, 0.82, 3.49, 1.13))
    assert abs(out["synclab_value"] - (3.49 / 1.13) / (1.68 / 0.82)) < 1e-12 and out["verdict"] == REPRODUCED
    assert judge(_growth(margin=0.05), _times(1.6, 0.8, 3.0, 1.45))["verdict"] == TIE  # 2.0 -> 2.07: +3 %
    assert judge(_growth(margin=0.05), _times(1.6, 0.8, 3.0, 1.7))["verdict"] == NOT


def test_ratio_growth_not_run_without_its_base_and_needs_four_selectors():
    import pytest

    assert judge(_growth(), _times(1.68, 0.82, 3.49, 1.13)[2:])["verdict"] == NOT_RUN
    data = _growth().model_dump()
    del data["base_den"]
    with pytest.raises(ValueError, match="needs 'num', 'den', 'base_num' and 'base_den'"):
        Claim.model_validate(data)


def test_a_direction_claim_without_a_margin_gets_the_3_percent_floor():
    out = judge(_direction_claim("below", margin=0.0), _pair(0.98, 1.0))
    assert out["verdict"] == TIE and out["margin"] == 0.03
    assert judge(_direction_claim("below", margin=0.0), _pair(0.96, 1.0))["verdict"] == REPRODUCED


def test_the_repeat_spread_widens_the_margin_when_larger():
    assert judge(_direction_claim("below"), _pair(0.9, 1.0))["verdict"] == REPRODUCED
    out = judge(_direction_claim("below"), _pair(0.9, 1.0), spread=0.12)  # repeats 12 % apart: 10 % is noise
    assert out["verdict"] == TIE and out["margin"] == 0.12
    assert judge(_direction_claim("below"), _pair(0.9, 1.0), spread=0.01)["margin"] == 0.05  # the judge's own


def test_a_target_of_ties_only_is_a_tie_and_ties_with_nots_are_not():
    from synclab.reproduce.verdict import summarize

    assert summarize([{"verdict": TIE}, {"verdict": TIE}, {"verdict": NOT_RUN}]) == TIE
    assert summarize([{"verdict": TIE}, {"verdict": NOT}]) == NOT
    assert summarize([{"verdict": TIE}, {"verdict": REPRODUCED}]) == PARTLY
