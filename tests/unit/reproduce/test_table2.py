"""MG-WFBP Table 2: the paper's 16-GPU all-reduce fit carried to SyncLab's worker count before it is compared."""

import pytest

from synclab.reproduce.schema import Claim
from synclab.reproduce.table2 import carry, factor
from synclab.reproduce.verdict import NOT, PARTLY, judge


def test_ring_start_up_grows_with_n_minus_one_and_per_byte_with_n_minus_one_over_n():
    assert factor("ring", "a", 16, 4) == pytest.approx(6 / 30)  # 2(N-1)α
    assert factor("ring", "b", 16, 4) == pytest.approx((3 / 4) / (15 / 16))
    assert carry(9.08e-4, "ring", "a", 16, 4) == pytest.approx(1.816e-4)


def test_logarithmic_algorithms_scale_by_log_n():
    assert factor("binary_tree", "a", 16, 4) == pytest.approx(0.5)
    assert factor("recursive_doubling", "b", 4, 16) == pytest.approx(2.0)
    assert factor("double_binary_tree", "b", 16, 4) == 1.0


def test_a_time_is_split_into_its_a_and_b_parts():
    b, size = 7.4e-10, 1024
    t = carry(9.08e-4 + b * size, "ring", "time", 16, 4, b=b, size=size)
    assert t == pytest.approx(9.08e-4 * 0.2 + b * size * 0.8)
    with pytest.raises(ValueError, match="needs the paper's b"):
        carry(1e-3, "ring", "time", 16, 4)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="at least 2 workers"):
        factor("ring", "a", 16, 1)
    with pytest.raises(ValueError, match="no all-reduce algorithm"):
        factor("butterfly", "a", 16, 4)


def _claim(**table2):
    return Claim.model_validate({
        "id": "a", "quote": "startup 908 us", "source": "MG-WFBP Fig. 4(b)", "paper_value": 9.08e-4, "unit": "s",
        "value": {"where": {"cluster.workers": 4}, "metric": "fit_a_s"},
        "table2": {"n_paper": 16, "term": "a", **table2}, "judge": {"within": 0.25, "partly_factor": 3}})


def test_the_claim_compares_with_the_paper_value_at_the_points_n():
    rows = [{"cluster.workers": 4, "fit_a_s": 1.9e-4}]
    out = judge(_claim(), rows)
    assert out["paper_value"] == 9.08e-4 and out["paper_value_compared"] == pytest.approx(1.816e-4)
    assert out["verdict"] == "reproduced" and "Table 2" in out["why"] and "N = 4" in out["why"]
    # the same fit against the paper's 16-GPU a unscaled would have been 4.8x apart
    assert judge(_claim(), [{"cluster.workers": 4, "fit_a_s": 9.0e-4}])["verdict"] == NOT
    assert judge(_claim(), [{"cluster.workers": 4, "fit_a_s": 3.0e-4}])["verdict"] == PARTLY


def test_table2_needs_a_value_claim_naming_its_n():
    with pytest.raises(ValueError, match="'table2' needs kind 'value'"):
        Claim.model_validate({"id": "a", "quote": "q", "source": "s", "paper_value": 1e-3,
                              "value": {"where": {"network.rate": "10gbit"}, "metric": "fit_a_s"},
                              "table2": {"n_paper": 16, "term": "a"}})
    with pytest.raises(ValueError, match="needs 'b' and 'size'"):
        _claim(term="time")
