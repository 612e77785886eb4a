import pytest

from synclab.report import IterationRow, compute_summary


def test_compute_summary_by_hand(iteration_rows):
    s = compute_summary(iteration_rows(), warmup=1)
    # measured iterations 2 and 3; cluster iteration time = slowest worker: 0.4 s and 0.6 s; 20 samples each
    assert s["measured_iterations"] == 2
    assert s["throughput_samples_per_s"] == pytest.approx(40 / 1.0)  # not mean(20/0.4, 20/0.6) = 41.67
    it = s["iteration_seconds"]
    assert it["mean"] == pytest.approx(0.5) and it["p50"] == pytest.approx(0.5)
    assert it["p99"] == pytest.approx(0.4 + 0.99 * 0.2)
    assert (it["min"], it["max"]) == pytest.approx((0.4, 0.6))
    assert s["compute_seconds_mean"] == pytest.approx((0.1 + 0.2 + 0.15 + 0.3) / 4)
    assert s["comm_wait_seconds_mean"] == pytest.approx(0.1875)
    assert s["comm_span_seconds_mean"] == pytest.approx(0.375)
    assert "overlap_fraction" not in s  # the misleading 1 - wait/span is gone; see report/overlap.py


def test_own_pace_by_hand(iteration_rows):
    s = compute_summary(iteration_rows(), warmup=1, lockstep=False)
    # measured iterations 2 and 3; rank 0 takes 0.2 + 0.3 s, rank 1 0.4 + 0.6 s, 20 samples each
    assert s["pace"] == "own" and compute_summary(iteration_rows(), warmup=1)["pace"] == "slowest"
    assert s["throughput_samples_per_s"] == pytest.approx(20 / 0.5 + 20 / 1.0)  # the workers' rates add up
    it = s["iteration_seconds"]
    assert (it["min"], it["mean"], it["max"]) == pytest.approx((0.3, 0.375, 0.45))  # mean over workers per i
    assert s["compute_seconds_mean"] == compute_summary(iteration_rows(), warmup=1)["compute_seconds_mean"]


def _turn_taking_rows():
    # two asynchronous workers, each slow every other iteration: both finish 4 iterations in 4 s
    return [{"iteration": i, "rank": r, "start_s": 0.0, "iteration_s": 1.5 if (i + r) % 2 else 0.5,
             "compute_s": 0.1, "comm_wait_s": 0.0, "loss": 1.0, "samples": 8, "bytes_sent": 0,
             "bytes_received": 0, "params_checksum": ""} for i in range(4) for r in (0, 1)]


def test_own_pace_workers_taking_turns_are_not_summed_maxima():
    rows = _turn_taking_rows()
    own, slowest = compute_summary(rows, lockstep=False), compute_summary(rows)
    assert own["iteration_seconds"]["mean"] == pytest.approx(1.0)
    assert own["throughput_samples_per_s"] == pytest.approx(2 * 32 / 4.0)
    assert slowest["iteration_seconds"]["mean"] == pytest.approx(1.5)  # what lockstep would claim


def test_each_strategy_is_summarized_by_the_pace_it_declares():
    # the summary asks the strategy (Strategy.lockstep), never its name; which strategies run at their own
    # pace is each strategy's own declaration (tests/unit/strategies)
    from synclab.strategies import registry

    for name in registry.names():
        lockstep = registry.get(name).lockstep
        assert isinstance(lockstep, bool), name
        mean = compute_summary(_turn_taking_rows(), lockstep=lockstep)["iteration_seconds"]["mean"]
        assert mean == pytest.approx(1.5 if lockstep else 1.0), name


def test_without_warmup_every_iteration_counts(iteration_rows):
    s = compute_summary(iteration_rows(), warmup=0)
    assert s["throughput_samples_per_s"] == pytest.approx(60 / (0.2 + 0.4 + 0.6))
    assert s["iteration_seconds"]["mean"] == pytest.approx(0.4)


def test_warmup_counts_iteration_numbers_not_rows(iteration_rows):
    assert compute_summary(iteration_rows((0, 1, 2)), warmup=1) == compute_summary(iteration_rows(), warmup=1)


def test_csv_strings_and_typed_rows_give_the_same_figures(iteration_rows):
    rows = iteration_rows()
    as_text = [{k: str(v) for k, v in r.items()} for r in rows]
    typed = [IterationRow.from_mapping(r) for r in rows]
    assert compute_summary(as_text, 1) == compute_summary(typed, 1) == compute_summary(rows, 1)


def test_comm_span_needs_its_column(iteration_rows):
    rows = [{k: v for k, v in r.items() if k != "comm_span_s"} for r in iteration_rows()]
    s = compute_summary(rows, warmup=1)
    assert "comm_span_seconds_mean" not in s


def test_bad_input_is_refused_by_name(iteration_rows):
    with pytest.raises(ValueError, match="no iterations left after 3 warm-up"):
        compute_summary(iteration_rows(), warmup=3)
    with pytest.raises(ValueError, match="warmup"):
        compute_summary(iteration_rows(), warmup=-1)
    rows = iteration_rows()
    del rows[2]["samples"]
    with pytest.raises(ValueError, match="'samples' is missing"):
        compute_summary(rows)
    rows = iteration_rows()
    rows[0]["iteration_s"] = "fast"
    with pytest.raises(ValueError, match="'iteration_s'"):
        compute_summary(rows)


def test_replay_schedule_error_by_hand():
    rows = [{"iteration": i, "rank": 0, "start_s": i, "iteration_s": 1.0, "compute_s": 0.5, "comm_wait_s": 0.5,
             "loss": "", "samples": 4, "bytes_sent": 0, "bytes_received": 0, "schedule_error_s": err}
            for i, err in ((1, 0.5), (2, 0.01), (3, 0.03))]
    s = compute_summary(rows, warmup=1)
    assert s["schedule_error"]["mean_seconds"] == pytest.approx(0.02)
    assert s["schedule_error"]["max_seconds"] == pytest.approx(0.03)
    assert s["schedule_error"]["fraction_max"] == pytest.approx(0.03)
    real = [{**r, "schedule_error_s": ""} for r in rows]
    assert "schedule_error" not in compute_summary(real, warmup=1)


def test_phases_calibration_and_warmup_overlap_rather_than_add_up():
    from synclab.report.records import iteration_phases

    assert iteration_phases(range(1, 9), warmup=2, calibration=5) == {
        1: "calibration", 2: "calibration", 3: "calibration", 4: "calibration", 5: "calibration",
        6: "steady", 7: "steady", 8: "steady"}
    assert iteration_phases([3, 4, 5, 6], warmup=2, calibration=0) == {3: "warmup", 4: "warmup", 5: "steady",
                                                                       6: "steady"}  # a resumed run
    assert iteration_phases([1, 2, 3], warmup=1, calibration=1) == {1: "calibration", 2: "steady", 3: "steady"}
    with pytest.raises(ValueError, match="must be >= 0"):
        iteration_phases([1], calibration=-1)


def test_calibration_iterations_are_left_out_of_every_figure(iteration_rows):
    # iterations 1-5: two workers of 1 s and 2 s (a slow calibration phase); 6-8: 0.1 s and 0.2 s
    rows = iteration_rows(iterations=range(1, 9))
    for r in rows:
        base = 0.1 if r["rank"] == 0 else 0.2
        r.update(iteration_s=base * (10 if r["iteration"] <= 5 else 1), compute_s=base / 2, comm_wait_s=base / 2,
                 comm_span_s=base)
    s = compute_summary(rows, warmup=2, calibration=5)
    assert s["phases"] == {"warmup": 0, "calibration": 5, "steady": 3}
    assert s["measured_iterations"] == 3 and s["figures_cover"] == "steady"
    assert s["iteration_seconds"]["mean"] == pytest.approx(0.2)  # the slower worker of the steady iterations
    assert s["iteration_seconds"]["max"] == pytest.approx(0.2)
    assert s["throughput_samples_per_s"] == pytest.approx(20 / 0.2)
    with_calibration = compute_summary(rows, warmup=2)  # the same rows without calibration: 3-8 measured
    assert with_calibration["iteration_seconds"]["mean"] == pytest.approx((3 * 2.0 + 3 * 0.2) / 6)
    assert with_calibration["phases"] == {"warmup": 2, "calibration": 0, "steady": 6}


def test_a_run_no_longer_than_its_calibration_says_its_figures_are_calibration(iteration_rows):
    s = compute_summary(iteration_rows(iterations=(1, 2, 3)), warmup=1, calibration=5)
    assert s["figures_cover"] == "calibration" and s["measured_iterations"] == 2  # iterations 2 and 3
    assert s["phases"] == {"warmup": 0, "calibration": 3, "steady": 0}
    assert s["iteration_seconds"]["mean"] == pytest.approx(0.5)


def test_summary_table_names_the_calibration_iterations():
    from synclab.report.table import iterations_text

    summary = {"iterations": 8, "warmup": 2, "measured_iterations": 3, "figures_cover": "steady",
               "phases": {"warmup": 0, "calibration": 5, "steady": 3},
               "calibration": {"iterations": [1, 2, 3, 4, 5], "what": "MG-WFBP profiling"}}
    assert iterations_text(summary) == ("8 (5 calibration, iterations 1-5: MG-WFBP profiling; 2 warm-up, 2 of "
                                        "them within the calibration; figures over 3 steady-state)")
    summary.update(figures_cover="calibration", measured_iterations=2, warmup=0)
    assert iterations_text(summary).endswith("figures over 2 calibration iterations: no steady-state iteration)")
    assert iterations_text({"iterations": 20, "warmup": 2}) == "20 (2 warm-up)"  # a record from before phases
