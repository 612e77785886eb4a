"""synclab.report.stragglers: each worker's wait attributed to the slowest worker of the iteration."""

from __future__ import annotations

import pytest

from synclab.report.records import IterationRow
from synclab.report.stragglers import attribute_waits
from synclab.report.summary import compute_summary
from synclab.report.table import per_worker_rows


def _row(it, rank, compute, wait):
    return IterationRow.from_mapping({"iteration": it, "rank": rank, "start_s": 0.0, "iteration_s": compute + wait,
                                      "compute_s": compute, "comm_wait_s": wait, "samples": 32,
                                      "loss": 0.0, "bytes_sent": 0, "bytes_received": 0})


ROWS = [_row(1, 0, 1.0, 1.3), _row(1, 1, 2.0, 0.3), _row(2, 0, 1.0, 0.2), _row(2, 1, 1.1, 0.1)]


def test_lockstep_wait_goes_to_the_slowest_then_to_communication():
    pw = attribute_waits(ROWS, lockstep=True)
    w0, w1 = pw["worker0"], pw["worker1"]
    assert w0["compute_s"] == pytest.approx(2.0) and w0["wait_s"] == pytest.approx(1.5)
    # it 1: 1.0 s of worker1's extra compute, 0.3 s communication; it 2: 0.1 s for worker1, 0.1 s communication
    assert w0["waited_for"] == pytest.approx({"worker1": 1.1, "communication": 0.4})
    assert w1["waited_for"] == pytest.approx({"communication": 0.4})
    assert (w0["slowest_iterations"], w1["slowest_iterations"]) == (0, 2)


def test_not_lockstep_waits_for_no_one():
    pw = attribute_waits(ROWS, lockstep=False)
    assert pw["worker0"]["waited_for"] == pytest.approx({"communication": 1.5})
    assert pw["worker1"]["slowest_iterations"] == 0


def test_summary_carries_it_and_the_table_shows_it():
    s = compute_summary(ROWS, warmup=0)
    assert s["per_worker"]["worker0"]["waited_for"]["worker1"] == pytest.approx(1.1)
    rows = dict(per_worker_rows(s["per_worker"]))
    assert "1.10 s for worker1" in rows["worker0"] and "slowest in 2 iteration(s)" in rows["worker1"]
    assert per_worker_rows(compute_summary(ROWS, warmup=0, lockstep=False)["per_worker"]) == []
    assert "per_worker" not in compute_summary([r for r in ROWS if r.rank == 0])
