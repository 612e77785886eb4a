"""The arithmetic of ``synclab load``'s results and its refusals of bad settings."""

import math

import pytest
from typer.testing import CliRunner

from synclab.cli import app
from synclab.load.run import LoadSettings, percentile, summarize


def test_percentile_walks_locusts_histogram():
    hist = {"1": 50, "2": 40, "10": 9, "100": 1}
    assert percentile(hist, 0.5) == 1.0
    assert percentile(hist, 0.9) == 2.0
    assert percentile(hist, 0.99) == 10.0
    assert percentile(hist, 1.0) == 100.0
    assert math.isnan(percentile({}, 0.5))


def test_summarize_counts_successes_and_rates():
    entry = {"name": "push+pull", "num_requests": 110, "num_failures": 10, "total_content_length": 4_000_000,
             "response_times": {"5": 100, "7": 10}, "max_response_time": 7.2}
    (row,) = summarize([entry], LoadSettings(users=3), duration_s=2.0)
    assert row["requests"] == 100 and row["failures"] == 10
    assert row["requests_per_s"] == 50.0
    assert row["mbytes_per_s"] == 2.0
    assert row["p50_ms"] == 5.0 and row["p99_ms"] == 7.0


@pytest.mark.parametrize("kwargs, words", [
    ({"target": "worker"}, "unknown load target"),
    ({"users": 0}, "users must be >= 1"),
    ({"duration_s": 0}, "positive"),
    ({"address": "127.0.0.1:1"}, "needs its job token"),
])
def test_bad_settings_are_named(kwargs, words):
    with pytest.raises(ValueError, match=words):
        LoadSettings(**kwargs)


def test_cli_refuses_bad_input_with_exit_2(tmp_path, monkeypatch):
    monkeypatch.delenv("SYNCLAB_TOKEN", raising=False)
    runner = CliRunner()
    r = runner.invoke(app, ["load", "--target", "nothing", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "unknown load target" in r.output
    r = runner.invoke(app, ["load", "--duration", "soon", "--out", str(tmp_path)])
    assert r.exit_code == 2 and "--duration" in r.output
    assert not (tmp_path / "load.csv").exists()
