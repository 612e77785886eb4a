import csv
import json

import pytest

from synclab.report import compute_summary, load_run, summary_table, write_report


def rows():
    out = []
    for it in (1, 2, 3):
        for rank, t in ((0, 0.1 * it), (1, 0.2 * it)):
            out.append({"iteration": it, "rank": rank, "start_s": 0, "iteration_s": t, "compute_s": t / 2,
                        "comm_wait_s": t / 2, "loss": 1.0 / it, "samples": 10, "bytes_sent": 5,
                        "bytes_received": 5, "comm_span_s": t, "params_checksum": ""})
    return out


def test_compute_summary_by_hand():
    s = compute_summary(rows(), warmup=1)
    # cluster iteration times = slowest worker: 0.4 and 0.6
    assert s["iteration_seconds"]["mean"] == pytest.approx(0.5)
    assert s["throughput_samples_per_s"] == pytest.approx(40 / 1.0)
    assert s["compute_seconds_mean"] == pytest.approx((0.1 + 0.2 + 0.15 + 0.3) / 4)
    assert s["overlap_fraction"] == pytest.approx(0.5)
    with pytest.raises(ValueError):
        compute_summary(rows(), warmup=3)


def make_run(tmp_path):
    r = rows()
    with (tmp_path / "iterations.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(r[0]))
        w.writeheader()
        w.writerows(r)
    summary = {"strategy": "ps", "model": "mlp", "batch_size": 10, "workers": 2, "ps_shards": 1, "iterations": 3,
               "warmup": 1, "network_backend": "app", "link_rate_bps": 1e9, "initial_loss": 1.0,
               "final_loss": 0.33, "bytes_sent": {"worker0": 15}, **compute_summary(r, 1)}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    with (tmp_path / "traffic-worker0.csv").open("w") as f:
        f.write("t_s,wall_time,tx_bytes,rx_bytes,tx_bps,rx_bps,if_tx_bytes,if_rx_bytes\n")
        for i in range(50):
            f.write(f"{i * 0.01},{i},{i * 100},{i * 50},80000,40000,,\n")
    return tmp_path


def test_write_report_makes_pngs(tmp_path):
    paths = write_report(make_run(tmp_path))
    assert {p.name for p in paths} == {"throughput.png", "comp-comm.png", "traffic-worker0.png"}
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert summary_table(load_run(tmp_path)).row_count >= 8


def test_load_run_names_the_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="summary.json"):
        load_run(tmp_path)
