import pytest
from hypothesis import given
from hypothesis import strategies as st

from synclab.units import parse_duration_s, parse_percent, parse_prometheus_duration_s, parse_rate_bps, parse_size_bytes


def test_errors_name_the_field():
    with pytest.raises(ValueError, match="^burst must not be negative"):
        parse_size_bytes("-1MB", "burst")
    with pytest.raises(ValueError, match="^unknown delay unit 'parsecs'"):
        parse_duration_s("20 parsecs", "delay")
    with pytest.raises(ValueError, match="^cannot parse loss 'lots'; write a percentage"):
        parse_percent("lots", "loss")


@pytest.mark.parametrize("bad", ["1e400", "1e300tbit", float("inf"), float("nan"), True, [1], None, "-0"])
def test_out_of_range_and_odd_input_is_a_value_error(bad):
    with pytest.raises(ValueError, match="rate"):
        parse_rate_bps(bad)


def test_bare_numbers_and_percentages():
    assert parse_rate_bps(1.5e9) == 1_500_000_000 and parse_rate_bps(10**30) == 10**30
    assert parse_size_bytes(1e6) == 1_000_000
    with pytest.raises(ValueError, match="whole number of bytes"):
        parse_size_bytes(1.5, "queue")
    assert parse_percent("1%") == 1.0 and parse_percent(0.5) == 0.5
    with pytest.raises(ValueError, match="unknown loss unit 'kbit'"):
        parse_percent("1kbit", "loss")


def test_prometheus_durations():
    assert parse_prometheus_duration_s("90s") == 90 and parse_prometheus_duration_s("5m") == 300
    assert parse_prometheus_duration_s("1h30m") == 5400 and parse_prometheus_duration_s("500ms") == 0.5
    assert parse_prometheus_duration_s("2d") == 2 * 86400 and parse_prometheus_duration_s("1w") == 7 * 86400
    for bad in ("", "5", "5 m", "m5", "5x", "-5m"):  # a bare number is not a Prometheus duration
        with pytest.raises(ValueError, match="cannot parse duration"):
            parse_prometheus_duration_s(bad)
    with pytest.raises(ValueError):  # tc's durations have no minutes
        parse_duration_s("5m")
    with pytest.raises(ValueError, match="^cannot parse --step '5'"):
        parse_prometheus_duration_s("5", "--step")


@given(st.text(max_size=12))
def test_prometheus_durations_raise_value_error_only(text):
    try:
        assert parse_prometheus_duration_s(text) >= 0
    except ValueError:
        pass
