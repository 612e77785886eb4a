"""Prometheus/Grafana durations ("5m", "1h30m") beside tc's ("5ms"): one owner, config.units."""

import pytest
from hypothesis import given, strategies as st

from synclab.config.units import parse_duration_s, parse_prometheus_duration_s


def test_prometheus_durations():
    assert parse_prometheus_duration_s("90s") == 90 and parse_prometheus_duration_s("5m") == 300
    assert parse_prometheus_duration_s("1h30m") == 5400 and parse_prometheus_duration_s("500ms") == 0.5
    assert parse_prometheus_duration_s("2d") == 2 * 86400 and parse_prometheus_duration_s("1w") == 7 * 86400
    for bad in ("", "5", "5 m", "m5", "5x", "-5m"):  # a bare number is not a Prometheus duration
        with pytest.raises(ValueError, match="cannot parse duration"):
            parse_prometheus_duration_s(bad)


def test_minutes_are_not_tc_units():
    assert parse_duration_s("5ms") == pytest.approx(0.005)
    with pytest.raises(ValueError):
        parse_duration_s("5m")


@given(st.text(max_size=12))
def test_raises_value_error_only(text):
    try:
        assert parse_prometheus_duration_s(text) >= 0
    except ValueError:
        pass
