"""The coordinator's iterations.csv and summary.json: each iteration's phase, steady-state figures."""

import csv

import pytest

from synclab.config import parse_spec
from synclab.roles.coordinator import JobState
from synclab.roles.records import build_summary, write_iterations
from synclab.wire import pb


def _reports(times: dict[int, float]) -> list[pb.IterationReport]:
    return [pb.IterationReport(iteration=i, rank=r, iteration_s=t, compute_s=0.01, comm_wait_s=t - 0.01, samples=8,
                               loss=1.0, schedule_error_s=float("nan"), params_checksum=float("nan"))
            for i, t in times.items() for r in (0, 1)]


def test_mgwfbp_profiling_is_calibration_in_the_records_and_outside_the_figures(tmp_path):
    spec = parse_spec({"strategy": {"name": "mgwfbp", "profile_iterations": 2}, "cluster": {"ps_shards": 0},
                       "run": {"iterations": 6, "warmup": 1, "events": False}})
    # iterations 1-4: profiling (WFBP) and the two that pay for it, 2 s each; 5-6: 0.5 s
    reports = _reports({1: 2.0, 2: 2.0, 3: 2.0, 4: 2.0, 5: 0.5, 6: 0.5})
    rows = write_iterations(tmp_path / "iterations.csv", reports, spec)
    with (tmp_path / "iterations.csv").open() as f:
        phases = {int(r["iteration"]): r["phase"] for r in csv.DictReader(f)}
    assert phases == {1: "calibration", 2: "calibration", 3: "calibration", 4: "calibration", 5: "steady",
                      6: "steady"}
    job = JobState(spec=spec, run_dir=tmp_path, job_id="j", network_backend="none", link_rate_bps=None,
                   expected={pb.WORKER: 2, pb.PS: 0})
    summary = build_summary(job, rows)
    assert summary["calibration"]["iterations"] == [1, 2, 3, 4]
    assert summary["phases"] == {"warmup": 0, "calibration": 4, "steady": 2}
    assert summary["iteration_seconds"]["mean"] == pytest.approx(0.5)
    assert summary["throughput_samples_per_s"] == pytest.approx(16 / 0.5)


def test_a_strategy_without_calibration_keeps_warmup_only(tmp_path):
    spec = parse_spec({"strategy": {"name": "ps"}, "run": {"iterations": 3, "warmup": 1, "events": False}})
    rows = write_iterations(tmp_path / "iterations.csv", _reports({1: 2.0, 2: 0.5, 3: 0.5}), spec)
    job = JobState(spec=spec, run_dir=tmp_path, job_id="j", network_backend="none", link_rate_bps=None,
                   expected={pb.WORKER: 2, pb.PS: 1})
    summary = build_summary(job, rows)
    assert "calibration" not in summary and summary["phases"] == {"warmup": 1, "calibration": 0, "steady": 2}
    assert summary["iteration_seconds"]["mean"] == pytest.approx(0.5)
