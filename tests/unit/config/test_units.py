import pytest

from synclab.config.units import parse_duration_s, parse_percent, parse_rate_bps, parse_size_bytes


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
