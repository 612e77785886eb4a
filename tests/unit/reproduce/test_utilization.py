"""Worker-machine utilization from traffic CSVs (P3 Fig. 8/9): bin merging under dilation, the share
definitions, the co-located machine read once, and the measured window from spans.csv."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from synclab.reproduce.utilization import (
    Counter,
    emulated_bins,
    first_payload_wall,
    iteration_ends,
    machine_counter,
    machine_utilization,
    shares,
)

D = 4
LINK = 1e9  # emulated bit/s; the host link carries LINK / D
FULL = LINK / D * 0.010 / 8  # bytes one host 10 ms bin carries at the host link rate (312,500)
T0 = 1000.0

# Emulated 10 ms bins A, B, C, D, each D=4 host bins of (tx, rx) shares of a full host bin:
#   A both ways full (overlap); B one host bin at 30 % (7.5 % of the emulated bin: idle, but 30 % if the
#   bins were not merged); C half the host bins full one way (50 %: not idle, no overlap); D rx only full.
PATTERN = [
    [(1, 1)] * 4,
    [(0.3, 0), (0, 0), (0, 0), (0, 0)],
    [(1, 0), (1, 0), (0, 0), (0, 0)],
    [(0, 1)] * 4,
]


def _rows(repeats: int = 5, *, payload_from: int = 0) -> list[dict[str, str]]:
    """Sampler rows every 10 ms of host time from T0; payload counters left zero before host bin
    ``payload_from``, interface counters follow PATTERN."""
    rows, tx, rx = [], 0.0, 0.0
    subs = [s for _ in range(repeats) for b in PATTERN for s in b]
    for i, (a, b) in enumerate(subs):
        tx, rx = tx + a * FULL, rx + b * FULL
        t = (i + 1) * 0.010
        pay = 1 if i >= payload_from else 0
        rows.append({"t_s": f"{t:.6f}", "wall_time": f"{T0 + t:.6f}", "tx_bytes": str(pay * int(tx)),
                     "rx_bytes": str(pay * int(rx)), "tx_bps": "0", "rx_bps": "0",
                     "if_tx_bytes": str(int(tx)), "if_rx_bytes": str(int(rx))})
    rows.insert(0, {"t_s": "0.000000", "wall_time": f"{T0:.6f}", "tx_bytes": "0", "rx_bytes": "0", "tx_bps": "0",
                    "rx_bps": "0", "if_tx_bytes": "0", "if_rx_bytes": "0"})
    return rows


def test_bins_merge_d_host_bins_into_one_emulated_bin_at_d_times_the_rate():
    counter, source = machine_counter({"worker0": _rows()})
    assert source == "interface"
    bins = emulated_bins(counter, T0, 0.0, 0.200, D)
    assert len(bins) == 20
    assert [round(tx / LINK, 3) for _, tx, _ in bins[:4]] == [1.0, 0.075, 0.5, 0.0]
    assert [round(rx / LINK, 3) for _, _, rx in bins[:4]] == [1.0, 0.0, 0.0, 1.0]
    s = shares(bins, LINK)
    assert s["idle_share"] == pytest.approx(0.25)  # B only: D is rx-busy
    assert s["tx_idle_share"] == pytest.approx(0.5)  # B and D
    assert s["overlap_share"] == pytest.approx(0.25)  # A
    assert s["tx_util"] == pytest.approx((1 + 0.075 + 0.5 + 0) / 4, abs=1e-6)
    assert s["rx_util"] == pytest.approx(0.5, abs=1e-6)


def test_a_wrong_merge_would_read_differently():
    """The fixture tells the merge apart: without merging (D=1) or without the x D, the shares change."""
    counter, _ = machine_counter({"worker0": _rows()})
    right = shares(emulated_bins(counter, T0, 0.0, 0.200, D), LINK)
    unmerged = shares(emulated_bins(counter, T0, 0.0, 0.800, 1), LINK / D)  # host bins at the host rate
    unscaled = shares(emulated_bins(counter, T0, 0.0, 0.200, D), LINK * D)  # merged, rate not x D
    assert unmerged["idle_share"] != pytest.approx(right["idle_share"])
    assert unscaled["overlap_share"] != pytest.approx(right["overlap_share"])
    shifted = shares(emulated_bins(counter, T0 + 0.020, 0.0, 0.190, D), LINK)  # half a bin late
    assert shifted["overlap_share"] != pytest.approx(right["overlap_share"])


def test_colocated_machine_reads_its_interface_once():
    rows = _rows()
    one, _ = machine_counter({"worker0": rows})
    two, source = machine_counter({"worker0": rows, "ps0": rows})  # same namespace, same counters
    assert source == "interface" and two.tx == one.tx


def test_without_interface_counters_the_payload_of_the_machine_is_summed():
    rows = [{**r, "if_tx_bytes": "", "if_rx_bytes": ""} for r in _rows()]
    c, source = machine_counter({"worker0": rows, "ps0": rows})
    assert source == "payload"
    assert c.tx[-1] == 2 * float(rows[-1]["tx_bytes"])


def test_counter_interpolates_and_clamps():
    c = Counter([0.0, 1.0, 2.0], [0.0, 10.0, 10.0], [0.0, 0.0, 4.0])
    assert c.at(0.5) == (5.0, 0.0)
    assert c.at(-1) == (0.0, 0.0) and c.at(9) == (10.0, 4.0)


def test_first_payload_wall_is_the_middle_of_the_first_busy_bin():
    rows = _rows(payload_from=3)  # host bin 3 spans (T0 + 0.03, T0 + 0.04]
    assert first_payload_wall([rows]) == pytest.approx(T0 + 0.035)
    with pytest.raises(ValueError, match="no payload"):
        first_payload_wall([_rows(payload_from=10_000)])


def test_bad_input_is_refused():
    counter, _ = machine_counter({"worker0": _rows()})
    with pytest.raises(ValueError, match="dilation"):
        emulated_bins(counter, T0, 0.0, 0.1, 0)
    with pytest.raises(ValueError, match="empty window"):
        emulated_bins(counter, T0, 0.1, 0.1, D)
    with pytest.raises(ValueError, match="no bins"):
        shares([], LINK)
    with pytest.raises(ValueError, match="no traffic"):
        machine_counter({})


def test_iteration_ends_skip_iteration_zero():
    rows = [{"iteration": "0", "end_s": "9"}, {"iteration": "1", "end_s": "0.2"}, {"iteration": "1", "end_s": "0.3"},
            {"iteration": "2", "end_s": "0.5"}]
    assert iteration_ends(rows) == {1: 0.3, 2: 0.5}


def _write(path: Path, rows: list[dict[str, str]]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


def test_machine_utilization_of_a_run_dir_measures_the_window_after_warm_up(tmp_path):
    rows = _rows(repeats=10, payload_from=0)  # first payload: middle of host bin 0 = T0 + 0.005
    _write(tmp_path / "traffic-worker0.csv", rows)
    _write(tmp_path / "traffic-ps0.csv", rows)
    _write(tmp_path / "traffic-worker1.csv", [{**r, "if_tx_bytes": "", "if_rx_bytes": ""} for r in rows])
    (tmp_path / "spec.yaml").write_text("cluster:\n  colocate_ps: true\n")
    # iteration ends at 0.1, 0.2, 0.3 emulated s; the first span starts 0.00125 emulated s (5 ms host) after
    # the records' time 0, so time 0 is T0 exactly and the bins line up with PATTERN
    spans = [{"iteration": str(i), "start_s": f"{0.1 * (i - 1) + 0.00125:.5f}", "end_s": f"{0.1 * i:.3f}"}
             for i in (1, 2, 3)]
    _write(tmp_path / "spans.csv", spans)
    summary = {"link_rate_bps": LINK, "warmup": 1, "iterations": 3}
    m, extra = machine_utilization(tmp_path, summary, D)
    assert extra["util_nodes"] == ["worker0", "ps0"] and extra["util_source"] == "interface"
    assert "iterations 2-3" in extra["util_window"]
    assert m["util_bins"] == 20  # 0.1 .. 0.3 emulated s
    assert len(extra["util_per_iteration"]) == 2 and "idle_share_iter_sd" in m
    assert len(extra["trace_tx_gbps"]) == 20 and extra["trace_t_s"][0] == 0.0
    assert m["idle_share"] == pytest.approx(0.25) and m["overlap_share"] == pytest.approx(0.25)
    # periods: bins C D A B C D A B C D (2 of 10 idle) and A B C D A B C D A B (3 of 10)
    assert [p["idle_share"] for p in extra["util_per_iteration"]] == pytest.approx([0.2, 0.3])
    assert m["idle_share_iter_sd"] == pytest.approx(0.0707, abs=1e-4)
    json.dumps(extra)
    with pytest.raises(ValueError, match="link_rate_bps"):
        machine_utilization(tmp_path, {"warmup": 1, "iterations": 3}, D)
