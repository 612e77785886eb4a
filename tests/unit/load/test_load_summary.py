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


def test_keys_or_floats_of_zero_are_refused_before_any_folder_is_made(tmp_path):
    for flag in ("--keys", "--floats", "--max-streams"):
        out = tmp_path / f"out{flag}"
        r = CliRunner().invoke(app, ["load", flag, "0", "--out", str(out)])
        assert r.exit_code == 2, r.output
        assert f"{flag.strip('-').replace('-', '_')} must be >= 1" in r.output
        assert not out.exists()


def test_outputs_of_an_earlier_run_are_removed_before_a_run(tmp_path):
    from synclab.load.run import OUTPUTS, clear_outputs

    for name in OUTPUTS:
        (tmp_path / name).write_text("stale")
    (tmp_path / "notes.txt").write_text("mine")
    clear_outputs(tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]  # only SyncLab's outputs go


def test_an_unreachable_address_is_an_error_naming_it(tmp_path):
    import socket

    from synclab.load.run import LoadError, check_reachable

    with socket.socket() as s:  # a port nobody listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        with pytest.raises(LoadError, match=f"127.0.0.1:{port} cannot be reached"):
            check_reachable(f"127.0.0.1:{port}", timeout_s=2)
    with pytest.raises(ValueError, match="not host:port"):
        check_reachable("nowhere")


def test_an_unreachable_address_exits_1_and_leaves_no_stale_numbers(tmp_path):
    import socket

    (tmp_path / "locust_final.json").write_text("[]")  # an earlier run's
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        r = CliRunner().invoke(app, ["load", "--address", f"127.0.0.1:{port}", "--token", "t", "--out",
                                     str(tmp_path)])
    assert r.exit_code == 1, r.output
    assert "cannot be reached" in r.output and not (tmp_path / "locust_final.json").exists()


@pytest.mark.parametrize("code,failures,started_here,problem", [
    (0, None, True, None),
    (3, "RESOURCE_EXHAUSTED: too many streams", True, None),      # the started target's back-pressure
    (3, "RESOURCE_EXHAUSTED: too many streams", False, "failed requests"),  # someone else's target: a fault
    (3, "UNAVAILABLE: connection refused", True, "failed requests"),
    (3, None, True, "no reasons recorded"),
    (2, None, True, "exited with code 2"),
])
def test_locusts_exit_code_is_honoured(tmp_path, code, failures, started_here, problem):
    from synclab.load.run import LoadResult, _check_exit

    if failures:
        (tmp_path / "locust_failures.csv").write_text(f"Method,Name,Error,Occurrences\ngrpc,push+pull,{failures},4\n")
    result = LoadResult(settings={}, rows=[{"requests": 10}])
    _check_exit(result, tmp_path, code, False, back_pressure_expected=started_here)
    if problem is None:
        assert result.ok, result.problems
    else:
        assert any(problem in p for p in result.problems), result.problems


def test_the_report_names_its_run(tmp_path):
    import json

    from synclab.load.run import LoadResult, write_results

    result = LoadResult(settings={"target": "ps", "users": 1}, rows=[],
                        run={"id": "abc123", "started_at": "2026-12-07T20:00:00+00:00", "target": "127.0.0.1:1"})
    write_results(result, tmp_path, [])
    assert json.loads((tmp_path / "load.json").read_text())["run"]["id"] == "abc123"
