import math

import numpy as np
import pytest

from synclab.metrics import NodeMetrics, TrafficSampler
from synclab.report import load_run


def test_load_run_reads_typed_records(run_dir):
    run = load_run(run_dir)
    assert run.summary["strategy"] == "ps"
    assert len(run.iterations) == 6 and run.ranks == [0, 1]
    r = run.iterations[1]
    assert (r.iteration, r.rank, r.samples) == (1, 1, 10)
    assert r.iteration_s == pytest.approx(0.2) and r.comm_span_s == pytest.approx(0.2)
    assert sorted(run.traffic) == ["ps0", "worker0", "worker1"] and run.workers == ["worker0", "worker1"]
    tr = run.traffic["worker0"]
    assert len(tr) == 50 and tr.tx_bps[0] == 80e6 and tr.has_wire
    assert not run.traffic["worker1"].has_wire and math.isnan(run.traffic["worker1"].if_tx_bytes[0])


def test_wire_rate_comes_from_interface_counter_differences(run_dir):
    tx, rx = load_run(run_dir).traffic["worker0"].wire_bps()
    assert math.isnan(tx[0])
    assert np.allclose(tx[1:], 101_000 * 8 / 0.01) and np.allclose(rx[1:], 51_000 * 8 / 0.01)


def test_workers_sort_naturally(run_dir):
    for n in ("worker10", "worker2"):
        (run_dir / f"traffic-{n}.csv").write_text((run_dir / "traffic-worker1.csv").read_text())
    assert load_run(run_dir).workers == ["worker0", "worker1", "worker2", "worker10"]


@pytest.mark.parametrize("name", ["summary.json", "iterations.csv"])
def test_load_run_names_the_missing_file(run_dir, name):
    (run_dir / name).unlink()
    with pytest.raises(FileNotFoundError, match=name):
        load_run(run_dir)


def test_load_run_of_a_missing_directory(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_run(tmp_path / "nope")


def test_a_malformed_row_is_named_by_file_and_line(run_dir):
    p = run_dir / "iterations.csv"
    lines = p.read_text().splitlines()
    lines[3] = lines[3].replace(",10,", ",ten,", 1)
    p.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError, match=r"iterations.csv line 4: column 'samples'"):
        load_run(run_dir)


def test_reads_what_the_traffic_sampler_writes(tmp_path, run_dir):
    m = NodeMetrics("worker0", "worker")
    with TrafficSampler(m, run_dir / "traffic-worker0.csv", interval_s=0.002) as s:
        m.add_sent("ps0", "gradient", 4096)
        assert s.wait_samples(s.samples + 2, timeout_s=10)
    tr = load_run(run_dir).traffic["worker0"]
    assert len(tr) == s.samples and tr.tx_bytes[-1] == 4096
    assert np.all(np.diff(tr.t_s) > 0)
