"""The max_ratio claim: the largest speed-up over a swept axis (P3 §5.2 "the maximum speed up obtained is 18%"),
and with ``at`` how much of that maximum is left at one axis value ("benefits of P3 diminish ...")."""

import pytest

from synclab.reproduce.schema import Claim
from synclab.reproduce.verdict import NOT, NOT_RUN, PARTLY, REPRODUCED, TIE, judge

RATES = ["2gbit", "4gbit", "10gbit"]


def _claim(**extra):
    judge_ = extra.pop("judge", {"within": 0.05, "same_side_of_one": True})
    return Claim.model_validate({
        "id": "max-gain", "quote": "the maximum speed up obtained is 18%", "source": "P3 §5.2", "paper_value": 1.18,
        "kind": "max_ratio", "over": "network.rate",
        "num": {"where": {"strategy.name": "p3"}, "metric": "throughput"},
        "den": {"where": {"strategy.name": "ps"}, "metric": "throughput"}, "judge": judge_, **extra})


def _rows(ps, p3, rates=RATES):
    return ([{"network.rate": r, "strategy.name": "ps", "throughput": t} for r, t in zip(rates, ps)]
            + [{"network.rate": r, "strategy.name": "p3", "throughput": t} for r, t in zip(rates, p3)])


def test_the_maximum_over_the_axis_is_judged_not_any_one_point():
    out = judge(_claim(), _rows([100, 200, 300], [110, 236, 300]))  # 1.10, 1.18, 1.00
    assert out["synclab_value"] == pytest.approx(1.18) and out["verdict"] == REPRODUCED
    assert "maximum 1.18 at 4gbit" in out["why"]


def test_a_smaller_maximum_is_partly_and_a_loss_everywhere_not():
    assert judge(_claim(), _rows([100, 200, 300], [107, 214, 300]))["verdict"] == PARTLY  # 1.07: same side
    assert judge(_claim(), _rows([100, 200, 300], [105, 210, 300]))["verdict"] == NOT  # 1.05: under 18 % / 3
    assert judge(_claim(), _rows([100, 200, 300], [90, 190, 290]))["verdict"] == NOT      # below 1 everywhere


def test_only_rates_where_both_ran_count_and_none_is_not_run():
    rows = _rows([100, 200], [118, 150], RATES[:2]) + [{"network.rate": "10gbit", "strategy.name": "p3",
                                                        "throughput": 900}]
    assert judge(_claim(), rows)["synclab_value"] == pytest.approx(1.18)
    assert judge(_claim(), _rows([100], [118], ["2gbit"])[:1])["verdict"] == NOT_RUN


def test_at_gives_the_share_of_the_maximum_left_there():
    claim = _claim(paper_value=1.0, at="2gbit", judge={"direction": "below", "margin": 0.03})
    out = judge(claim, _rows([100, 200, 300], [105, 276, 310]))  # 1.05 at 2gbit, max 1.38 at 4gbit
    assert out["synclab_value"] == pytest.approx(1.05 / 1.38) and out["verdict"] == REPRODUCED
    # the max is at 2gbit: a share of 1, no diminishing at all, is a tie (a share cannot exceed 1)
    assert judge(claim, _rows([100, 200, 300], [138, 276, 310]))["verdict"] == TIE
    assert judge(claim, _rows([100], [105], ["2gbit"]))["verdict"] == NOT_RUN       # one rate: no share


def test_max_ratio_needs_its_axis_free_and_at_only_with_it():
    with pytest.raises(ValueError, match="'over'"):
        _claim(over=None)
    with pytest.raises(ValueError, match="must not fix"):
        Claim.model_validate({"id": "x", "quote": "q", "source": "s", "paper_value": 1, "kind": "max_ratio",
                              "over": "network.rate", "num": {"where": {"network.rate": "4gbit"}, "metric": "m"},
                              "den": {"where": {}, "metric": "m"}})
    with pytest.raises(ValueError, match="'at'"):
        Claim.model_validate({"id": "x", "quote": "q", "source": "s", "paper_value": 1, "kind": "ratio", "at": "2gbit",
                              "num": {"where": {}, "metric": "m"}, "den": {"where": {}, "metric": "m"}})


def test_a_ratio_within_the_noise_margin_of_one_shows_no_direction():
    noisy = _claim(judge={"within": 0.1, "same_side_of_one": True, "margin": 0.03})
    out = judge(noisy, _rows([100, 200, 300], [100.5, 201, 300]))  # max 1.005: on the paper's side, but noise
    assert out["verdict"] == TIE and "noise margin" in out["why"]
    assert judge(noisy, _rows([100, 200, 300], [107, 214, 300]))["verdict"] == PARTLY  # 1.07: past the margin
    # a judge without a margin still gets the 3 % floor: 1.005 is a tie, not a direction
    assert judge(_claim(), _rows([100, 200, 300], [100.5, 201, 300]))["verdict"] == TIE
    # and so is a ratio just below 1, which float noise would have put on the opposite side
    assert judge(_claim(), _rows([100, 200, 300], [99.9, 199, 299]))["verdict"] == TIE


def test_a_maximum_the_paper_places_elsewhere_is_at_best_partly():
    placed = _claim(peak_at="4gbit", judge={"within": 0.1, "same_side_of_one": True, "margin": 0.03})
    there = judge(placed, _rows([100, 200, 300], [110, 236, 300]))  # max 1.18 at 4gbit, where the paper has it
    assert there["verdict"] == REPRODUCED and "at the paper's 4gbit too" in there["why"]
    near = judge(placed, _rows([100, 200, 300], [119, 234, 300]))  # 1.19 at 2gbit, 1.17 at 4gbit: noise apart
    assert near["verdict"] == REPRODUCED
    moved = judge(placed, _rows([100, 200, 300], [120, 210, 300]))  # 1.20 at 2gbit, only 1.05 at 4gbit
    assert moved["verdict"] == PARTLY and "not at the paper's 4gbit" in moved["why"]
    assert judge(placed, _rows([100, 200, 300], [90, 190, 290]))["verdict"] == NOT  # never raised
    with pytest.raises(ValueError, match="'peak_at'"):
        Claim.model_validate({"id": "x", "quote": "q", "source": "s", "paper_value": 1, "kind": "ratio",
                              "peak_at": "2gbit", "num": {"where": {}, "metric": "m"},
                              "den": {"where": {}, "metric": "m"}})


def _ratio(paper, **judge_):
    return Claim.model_validate({
        "id": "gain", "quote": "q", "source": "s", "paper_value": paper, "kind": "ratio",
        "num": {"where": {"strategy.name": "p3"}, "metric": "throughput"},
        "den": {"where": {"strategy.name": "ps"}, "metric": "throughput"}, "judge": judge_})


def _two(p3, ps=100.0):
    return [{"strategy.name": "p3", "throughput": p3}, {"strategy.name": "ps", "throughput": ps}]


def test_a_ratio_near_one_is_judged_on_its_gain():
    claim = _ratio(1.10, within=0.1, same_side_of_one=True)
    out = judge(claim, _two(104))  # 1.04 is within 10 % of 1.10, but its gain 4 % is 60 % short of 10 %
    assert out["verdict"] == PARTLY and "gain +4.0% vs +10.0%" in out["why"]
    assert judge(claim, _two(108))["verdict"] == REPRODUCED  # 8 % vs 10 %: within the 3 % margin floor
    assert judge(claim, _two(95))["verdict"] == NOT          # a 5 % loss: opposite direction


def test_far_from_one_the_gain_and_the_ratio_agree():
    claim = _ratio(13.9, within=0.15, same_side_of_one=True)
    assert judge(claim, _two(1300))["verdict"] == REPRODUCED  # gain 12.0 vs 12.9: -7 %
    assert judge(claim, _two(1180))["verdict"] == PARTLY      # gain 10.8 vs 12.9: -16 %


def test_a_paper_ratio_of_one_is_reproduced_within_its_tolerance_of_no_gain():
    claim = _ratio(1.0, within=0.05, partly_factor=1.15)
    assert judge(claim, _two(104))["verdict"] == REPRODUCED
    assert judge(claim, _two(110))["verdict"] == PARTLY
    assert judge(claim, _two(120))["verdict"] == NOT


def test_a_gain_claim_without_same_side_uses_the_partly_factor_on_the_gain():
    claim = _ratio(1.73, within=0.05, partly_factor=1.1)
    assert judge(claim, _two(172))["verdict"] == REPRODUCED   # 72 % vs 73 %
    assert judge(claim, _two(168))["verdict"] == PARTLY       # 68 % vs 73 %: x1.07
    assert judge(claim, _two(160))["verdict"] == NOT          # 60 % vs 73 %: x1.22 (the ratio is only 8 % off)


def test_same_side_is_partly_only_from_a_third_of_the_paper_gain():
    claim = _ratio(1.61, within=0.1, same_side_of_one=True)
    short = judge(claim, _two(104))  # a 4 % gain against the paper's 61 %: the right side, far too small
    assert short["verdict"] == NOT and "under a third" in short["why"]
    assert judge(claim, _two(121))["verdict"] == PARTLY   # 21 % >= 61 % / 3
    assert judge(claim, _two(119))["verdict"] == NOT      # 19 % < 20.3 %
    big = _ratio(13.9, within=0.15, same_side_of_one=True)
    assert judge(big, _two(424))["verdict"] == NOT        # 4.24x: gain 3.24 < 12.9 / 3
    assert judge(big, _two(600))["verdict"] == PARTLY     # gain 5.0 >= 4.3
    assert judge(big, _two(3000))["verdict"] == PARTLY    # larger than the paper's: right side, more than a third
