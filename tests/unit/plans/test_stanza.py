"""Stanza's throughput model (eq. 2-5) and the PS model (eq. 6-7), checked by hand."""

from __future__ import annotations

import pytest

from synclab.collective.schedules import recursive_doubling_schedule
from synclab.plans.stanza import (
    PsProfile,
    StanzaProfile,
    choose_fc_workers,
    choose_ps_servers,
    conv_allreduce_rounds,
    ps_iteration_time,
    ps_throughput,
    stanza_compute_time,
    stanza_iteration_time,
    stanza_throughput,
)

# 32 bit/s and 4-byte values: one value takes one second, so B = 1 value/s and
# the paper's formulas can be evaluated by hand.
PROFILE = StanzaProfile(
    conv_time_s=10.0, fc_time_s=1.0, activations=2, batch_size=3, conv_params=5, bandwidth_bps=32
)


@pytest.mark.parametrize(
    "n_c, rounds",
    [(1, 0), (2, 1), (3, 3), (4, 2), (5, 4), (7, 4), (8, 3), (9, 5), (16, 4), (17, 6), (80, 8)],
)
def test_conv_allreduce_rounds(n_c, rounds):
    assert conv_allreduce_rounds(n_c) == rounds


def test_rounds_match_the_recursive_doubling_schedule():
    for n_c in range(1, 65):
        assert conv_allreduce_rounds(n_c) == len(recursive_doubling_schedule(n_c))


def test_rounds_are_floor_plus_two_not_eq_3s_ceiling():
    # eq. 3 prints ceil(log2 3) + 2 = 4; §4.1.2's algorithm takes 1 + 1 + 1 = 3 rounds
    assert conv_allreduce_rounds(3) == 3
    assert conv_allreduce_rounds(3, "as-printed") == 4
    assert [conv_allreduce_rounds(n, "as-printed") for n in (1, 2, 4, 5, 8, 9)] == [0, 1, 2, 5, 3, 6]
    with pytest.raises(ValueError, match="reading"):
        conv_allreduce_rounds(3, "verbatim")


def test_compute_time_eq_2():
    assert stanza_compute_time(4, 1, PROFILE) == 10 + 4 * 1
    assert stanza_compute_time(3, 2, PROFILE) == 10 + 1.5


def test_iteration_time_eq_3_power_of_two():
    # t_s^c = 14; CONV-FC 2*4*2*3/1 = 48; all-reduce 5 * log2(4) = 10
    assert stanza_iteration_time(4, 1, PROFILE) == 14 + 48 + 10
    assert stanza_throughput(4, 1, PROFILE) == pytest.approx(4 * 3 / 72)


def test_iteration_time_eq_3_non_power_of_two():
    # t_s^c = 11.5; CONV-FC 2*3*2*3/2 = 18; all-reduce 5 * (floor(log2 3) + 2) = 15
    assert stanza_iteration_time(3, 2, PROFILE) == 11.5 + 18 + 15
    assert stanza_throughput(3, 2, PROFILE) == pytest.approx(9 / 44.5)


def test_bandwidth_units():
    # AlexNet's 2.47e6 CONV params, 8 CONV workers, 10 Gbit/s, fp32: 3 rounds
    profile = StanzaProfile(
        conv_time_s=0.0, fc_time_s=0.0, activations=0, batch_size=1,
        conv_params=2_470_000, bandwidth_bps=10e9,
    )
    assert stanza_iteration_time(8, 1, profile) == pytest.approx(3 * 2_470_000 * 32 / 10e9)


def test_choose_fc_workers_eq_5_by_hand():
    # N = 5: throughput for n_f = 1..4 is 12/72, 9/44.5, 6/23.67, 3/13.25 -> n_f = 3
    assert [round(stanza_throughput(5 - n_f, n_f, PROFILE), 4) for n_f in range(1, 5)] == [
        0.1667, 0.2022, 0.2535, 0.2264,
    ]
    assert choose_fc_workers(5, PROFILE, reading="as-printed") == 3  # ceil rounds: n_c = 2 is a power of two
    assert choose_fc_workers(5, PROFILE) == 2  # n_f <= n_c


def test_one_fc_worker_when_fc_side_is_cheap():
    profile = StanzaProfile(
        conv_time_s=1.0, fc_time_s=0.0, activations=0, batch_size=32,
        conv_params=1000, bandwidth_bps=1e9,
    )
    assert choose_fc_workers(12, profile) == 1


def test_fc_memory_bound():
    # footnote 4: one FC worker's memory serves 10 CONV workers; 11 would not fit
    profile = StanzaProfile(
        conv_time_s=1.0, fc_time_s=0.0, activations=0, batch_size=32,
        conv_params=1000, bandwidth_bps=1e9,
    )
    assert choose_fc_workers(12, profile, max_conv_per_fc=10) == 2


def test_ties_go_to_fewest_fc_workers():
    profile = StanzaProfile(
        conv_time_s=1.0, fc_time_s=1.0, activations=0, batch_size=1,
        conv_params=0, bandwidth_bps=1.0,
    )
    # N = 3: (n_c, n_f) = (2, 1) gives 2 / (1 + 2) and (1, 2) gives 1 / (1 + 0.5)
    assert stanza_throughput(2, 1, profile) == stanza_throughput(1, 2, profile)
    assert choose_fc_workers(3, profile) == 1


def test_ps_model_eq_6_7_by_hand():
    profile = PsProfile(compute_time_s=2.0, params=5, batch_size=3, bandwidth_bps=32)
    assert ps_iteration_time(3, 1, profile) == 2 * 3 * 5 / 1 + 2
    assert ps_throughput(3, 1, profile) == pytest.approx(9 / 32)
    # N = 4: n_s = 1, 2, 3 give 9/32, 6/12, 3/(10/3 + 2) -> 3 servers
    assert choose_ps_servers(4, profile) == 3


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"conv_time_s": -1.0}, "conv_time_s"),
        ({"bandwidth_bps": 0.0}, "bandwidth_bps"),
        ({"batch_size": 0}, "batch_size"),
        ({"activations": -1}, "activations"),
    ],
)
def test_profile_refuses_bad_values(kwargs, field):
    values = dict(
        conv_time_s=1.0, fc_time_s=1.0, activations=1, batch_size=1,
        conv_params=1, bandwidth_bps=1.0,
    )
    values.update(kwargs)
    with pytest.raises(ValueError, match=field):
        StanzaProfile(**values)


def test_worker_counts_are_validated():
    with pytest.raises(ValueError, match="n_c"):
        stanza_iteration_time(0, 1, PROFILE)
    with pytest.raises(ValueError, match="n_f"):
        stanza_iteration_time(1, 0, PROFILE)
    with pytest.raises(ValueError, match="total_nodes"):
        choose_fc_workers(1, PROFILE)
