import csv
import json

import pytest

from synclab.metrics import TRAFFIC_COLUMNS
from synclab.report import ITERATION_COLUMNS, compute_summary


def iteration_rows(iterations=(1, 2, 3)) -> list[dict]:
    """Two workers; rank 0 takes 0.1·i s, rank 1 0.2·i s; half compute, half non-overlapped comm."""
    out = []
    for i, it in enumerate(iterations, start=1):
        for rank, t in ((0, 0.1 * i), (1, 0.2 * i)):
            out.append({"iteration": it, "rank": rank, "start_s": 0.3 * (i - 1), "iteration_s": t,
                        "compute_s": t / 2, "comm_wait_s": t / 2, "loss": 1.0 / i, "samples": 10,
                        "bytes_sent": 5, "bytes_received": 5, "comm_span_s": t, "params_checksum": ""})
    return out


def write_traffic(path, n=50, wire=True):
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(TRAFFIC_COLUMNS)
        for i in range(1, n + 1):
            w.writerow([f"{i * 0.01:.6f}", 1.7e9 + i * 0.01, i * 100_000, i * 50_000, 80_000_000, 40_000_000,
                        i * 101_000 if wire else "", i * 51_000 if wire else ""])


@pytest.fixture(name="iteration_rows")
def iteration_rows_fixture():
    return iteration_rows


@pytest.fixture
def run_dir(tmp_path):
    """A small synthetic run: 2 workers × 3 iterations, one PS shard, traces of worker0, worker1 and ps0."""
    rows = iteration_rows()
    with (tmp_path / "iterations.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=[*ITERATION_COLUMNS, "comm_span_s", "params_checksum"])
        w.writeheader()
        w.writerows(rows)
    summary = {"status": "ok", "strategy": "ps", "model": "mlp", "batch_size": 10, "workers": 2, "ps_shards": 1,
               "iterations": 3, "warmup": 1, "network_backend": "app", "link_rate_bps": 1e9,
               "initial_loss": 1.0, "final_loss": 1 / 3, "bytes_sent": {"worker0": 15, "worker1": 15, "ps0": 30},
               **compute_summary(rows, warmup=1)}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    write_traffic(tmp_path / "traffic-worker0.csv")
    write_traffic(tmp_path / "traffic-worker1.csv", wire=False)
    write_traffic(tmp_path / "traffic-ps0.csv")
    return tmp_path
