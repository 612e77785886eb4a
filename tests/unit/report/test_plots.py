import json

import pytest

from synclab.report import load_run, plot_traffic, summary_table, write_report

PNG = b"\x89PNG\r\n\x1a\n"


def test_write_report_makes_pngs(run_dir):
    paths = write_report(run_dir)
    assert [p.name for p in paths] == ["throughput.png", "comp-comm.png", "loss.png", "traffic-worker0.png"]
    for p in paths:
        assert p.parent == run_dir and p.read_bytes()[:8] == PNG


def test_traffic_plot_zooms_and_works_without_link_rate(run_dir):
    s = json.loads((run_dir / "summary.json").read_text())
    s["link_rate_bps"] = None
    (run_dir / "summary.json").write_text(json.dumps(s))
    run = load_run(run_dir)
    out = plot_traffic(run, "worker1", run_dir / "zoom.png", window=(0.1, 0.3))
    assert out.read_bytes()[:8] == PNG
    with pytest.raises(ValueError, match="window"):
        plot_traffic(run, "worker1", run_dir / "bad.png", window=(0.3, 0.1))


def test_traffic_plot_of_a_node_without_trace_names_the_file(run_dir):
    with pytest.raises(FileNotFoundError, match="traffic-worker7.csv"):
        plot_traffic(load_run(run_dir), "worker7", run_dir / "x.png")


def test_report_without_traffic_traces(run_dir):
    for p in run_dir.glob("traffic-*.csv"):
        p.unlink()
    assert [p.name for p in write_report(run_dir)] == ["throughput.png", "comp-comm.png", "loss.png"]


def test_summary_table_shows_the_headline_figures(run_dir):
    table = summary_table(load_run(run_dir))
    keys = list(table.columns[0].cells)
    values = dict(zip(keys, table.columns[1].cells))
    assert {"status", "strategy", "cluster", "throughput", "iteration time", "bytes sent"} <= set(keys)
    assert values["throughput"] == "40.0 samples/s"
    assert values["iteration time"] == "mean 500.0 ms, p50 500.0 ms, p99 598.0 ms"
    assert values["bytes sent"] == "ps0 30 B, worker0 15 B, worker1 15 B"  # natural order
    assert "communication hidden" not in values  # this run has no overlap measure (no spans.csv)


def test_summary_table_shows_communication_hidden_with_its_definition(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(communication_hidden=0.25, communicating_seconds_mean=0.2)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    values = dict(zip(*(c.cells for c in summary_table(load_run(run_dir)).columns)))
    assert values["communication hidden"].startswith("25% of 200.0 ms on the wire per iteration (")


def test_summary_table_shows_test_accuracy_of_an_evaluated_run(run_dir):
    values = dict(zip(*(c.cells for c in summary_table(load_run(run_dir)).columns)))
    assert "test accuracy" not in values  # no run.eval_every
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(final_test_accuracy=0.9722, final_eval_iteration=300, best_test_accuracy=0.975,
                   best_eval_iteration=275, test_samples=360)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    values = dict(zip(*(c.cells for c in summary_table(load_run(run_dir)).columns)))
    assert values["test accuracy"] == "97.22% after iteration 300 (best 97.50% at 275; 360 held-out samples)"


def test_summary_table_says_na_without_communication(run_dir):
    summary = json.loads((run_dir / "summary.json").read_text())
    summary.update(communication_hidden=None, communicating_seconds_mean=None)
    (run_dir / "summary.json").write_text(json.dumps(summary))
    values = dict(zip(*(c.cells for c in summary_table(load_run(run_dir)).columns)))
    assert values["communication hidden"] == "n/a (no communication)"


def test_report_draws_overlap_per_iteration(run_dir):
    from synclab.report.overlap import write_overlap

    write_overlap(run_dir / "overlap.csv", [
        {"worker": w, "iteration": i, "communicating_s": 0.2, "overlapped_s": 0.05 * i, "hidden": 0.25 * i}
        for w in ("worker0", "worker1") for i in (1, 2, 3)])
    names = [p.name for p in write_report(run_dir)]
    assert "overlap.png" in names and (run_dir / "overlap.png").stat().st_size > 0


def test_summary_table_tolerates_missing_figures(run_dir):
    (run_dir / "summary.json").write_text(json.dumps({"status": "failed", "initial_loss": None}))
    values = dict(zip(*(c.cells for c in summary_table(load_run(run_dir)).columns)))
    assert values["status"] == "failed" and values["throughput"] == "—" and values["loss"] == "— → —"
