"""The overlap arithmetic on synthetic spans, exactly (issue 18)."""

from __future__ import annotations

import pytest

from synclab.report.overlap import intersect, length, message_spans, overlap_rows, subtract, summarize, union


def test_union_merges_touching_nested_and_drops_empty():
    assert union([(3, 4), (0, 1), (1, 2), (0.5, 0.7), (5, 5), (6, 5)]) == [(0, 2), (3, 4)]
    assert union([]) == []


def test_intersect_and_subtract():
    x, y = [(0, 2), (3, 6)], [(1, 4), (5, 7)]
    assert intersect(x, y) == [(1, 2), (3, 4), (5, 6)]
    assert subtract(x, y) == [(0, 1), (4, 5)]
    assert subtract([(0, 10)], [(2, 3), (2.5, 4), (9, 12)]) == [(0, 2), (4, 9)]
    assert subtract([(0, 1)], []) == [(0, 1)]
    assert length(intersect([(0, 1)], [(1, 2)])) == 0


def _span(node, kind, it, start, end, peer="", key="k", slice_=0):
    return {"node": node, "kind": kind, "iteration": it, "peer": peer, "key": key, "slice": slice_, "bytes": 0,
            "start_s": start, "end_s": end}


def test_message_span_runs_from_first_chunk_sent_to_last_chunk_received():
    spans = [_span("w0", "tx", 1, 1.0, 1.2, peer="ps0"), _span("ps0", "rx", 1, 1.1, 1.5, peer="w0"),
             _span("w0", "tx", 1, 2.0, 2.1, peer="ps0"), _span("ps0", "rx", 1, 2.05, 2.3, peer="w0"),
             _span("ps0", "tx", 1, 3.0, 3.1, peer="w0", key="other")]  # its rx half is missing: stands alone
    assert sorted(message_spans(spans)) == [("ps0", "w0", 1, (3.0, 3.1)), ("w0", "ps0", 1, (1.0, 1.5)),
                                            ("w0", "ps0", 1, (2.0, 2.3))]


def test_overlap_of_one_worker_by_hand():
    spans = [
        # iteration 1: compute 0-10 with a gate wait 2-3; iteration 2: compute 12-20
        _span("w0", "compute", 1, 0, 10), _span("w0", "gate_wait", 0, 2, 3), _span("w0", "compute", 2, 12, 20),
        # iteration 1's messages: push 8-11 (w0 -> ps0, received by 11.5), pull 11.5-13 (ps0 -> w0)
        _span("w0", "tx", 1, 8, 11, peer="ps0"), _span("ps0", "rx", 1, 8.2, 11.5, peer="w0"),
        _span("ps0", "tx", 1, 11.5, 12.5, peer="w0", key="pull"), _span("w0", "rx", 1, 11.6, 13, peer="ps0",
                                                                        key="pull"),
        # iteration 2: one message entirely inside the gate wait of nothing: 21-22 (after compute)
        _span("w0", "tx", 2, 21, 22, peer="ps0", key="late"),
    ]
    rows = {r["iteration"]: r for r in overlap_rows(spans)}
    # iteration 1: wire busy 8-13 (5 s); compute covers 8-10 and 12-13 (3 s)
    assert rows[1]["communicating_s"] == pytest.approx(5.0)
    assert rows[1]["overlapped_s"] == pytest.approx(3.0)
    assert rows[1]["hidden"] == pytest.approx(0.6)
    assert rows[2]["communicating_s"] == pytest.approx(1.0) and rows[2]["overlapped_s"] == 0.0
    s = summarize(list(rows.values()))
    assert s["communication_hidden"] == pytest.approx(3.0 / 6.0)
    assert s["communicating_seconds_mean"] == pytest.approx(3.0)
    assert summarize(list(rows.values()), warmup=1)["communication_hidden"] == 0.0


def test_gate_waits_are_not_compute():
    spans = [_span("w0", "compute", 1, 0, 10), _span("w0", "gate_wait", 0, 0, 4),
             _span("w0", "tx", 1, 1, 5, peer="w1")]
    (row,) = overlap_rows(spans)
    assert (row["communicating_s"], row["overlapped_s"]) == (4, 1)


def test_without_communication_hidden_is_none():
    rows = overlap_rows([_span("w0", "compute", 1, 0, 1), _span("w0", "compute", 2, 1, 2)])
    assert [r["hidden"] for r in rows] == [None, None]
    assert summarize(rows) == {"communication_hidden": None, "communicating_seconds_mean": 0.0}
    assert summarize([]) == {"communication_hidden": None, "communicating_seconds_mean": None}


def test_messages_of_setup_iteration_0_are_left_out():
    rows = overlap_rows([_span("w0", "compute", 1, 0, 1), _span("w0", "tx", 0, 0, 1, peer="ps0")])
    assert rows[0]["communicating_s"] == 0


def test_worker_side_updates_count_as_compute():
    spans = [_span("w0", "compute", 1, 0, 1), _span("w0", "tx", 1, 1, 3, peer="w1"), _span("w0", "update", 0, 2, 2.5)]
    (row,) = overlap_rows(spans)
    assert (row["communicating_s"], row["overlapped_s"]) == (2, 0.5)
