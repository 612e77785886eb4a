import csv
import statistics

import pytest

from synclab.metrics import TRAFFIC_COLUMNS, NodeMetrics, TrafficSampler
from synclab.metrics.sampler import RunningStats, next_tick


def read_rows(path):
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        assert tuple(reader.fieldnames) == TRAFFIC_COLUMNS
        return list(reader)


def test_schedule_keeps_absolute_deadlines():
    start, interval = 100.0, 0.01
    assert next_tick(1, start + 0.0102, start, interval) == 2  # woke a little late: no drift carried on
    assert next_tick(1, start + 0.0099, start, interval) == 2  # woke early
    assert next_tick(1, start + 0.0451, start, interval) == 5  # 3.5 intervals late: 2, 3 and 4 are skipped


def test_running_stats_match_statistics():
    xs = [0.01, 0.012, 0.009, 0.0101, 0.02]
    s = RunningStats()
    for x in xs:
        s.add(x)
    assert s.count == 5 and s.min == 0.009 and s.max == 0.02
    assert s.mean == pytest.approx(statistics.fmean(xs))
    assert s.std == pytest.approx(statistics.pstdev(xs))


def test_rows_track_the_byte_totals(tmp_path):
    m = NodeMetrics("worker0", "worker")
    path = tmp_path / "traffic-worker0.csv"
    with TrafficSampler(m, path, interval_s=0.005, interfaces=[]) as s:
        m.add_sent("ps0", "gradient", 1000)
        m.add_received("ps0", "params", 500)
        assert s.wait_samples(s.samples + 2, timeout_s=10)  # a whole bin after the adds
        m.add_sent("ps1", "gradient", 24)
    rows = read_rows(path)
    assert len(rows) >= 2
    assert (int(rows[-1]["tx_bytes"]), int(rows[-1]["rx_bytes"])) == (1024, 500)
    assert any(int(r["tx_bytes"]) == 1000 and int(r["rx_bytes"]) == 500 for r in rows)
    t = [float(r["t_s"]) for r in rows]
    assert t == sorted(t) and t[0] > 0
    wall = [float(r["wall_time"]) for r in rows]
    assert wall[-1] - wall[0] == pytest.approx(t[-1] - t[0], abs=0.05)
    # bits per bin times bin length add back up to the bytes moved (row i covers (t[i-1], t[i]], t[-1] = 0)
    lengths = [b - a for a, b in zip([0.0] + t, t)]
    assert sum(float(r["tx_bps"]) * d for r, d in zip(rows, lengths)) / 8 == pytest.approx(1024, abs=1)
    assert sum(float(r["rx_bps"]) * d for r, d in zip(rows, lengths)) / 8 == pytest.approx(500, abs=1)
    assert all(r["if_tx_bytes"] == "" and r["if_rx_bytes"] == "" for r in rows)


def test_wire_counters_of_the_chosen_interfaces(tmp_path, sys_net, write_counters):
    m = NodeMetrics("worker0", "worker", sys_net=sys_net)
    path = tmp_path / "traffic.csv"
    with TrafficSampler(m, path, interval_s=0.005) as s:
        assert s.wait_samples(1, timeout_s=10)
        write_counters(sys_net, "eth0", 1010, 2020)
        assert s.wait_samples(s.samples + 2, timeout_s=10)
    rows = read_rows(path)
    assert (rows[0]["if_tx_bytes"], rows[0]["if_rx_bytes"]) == ("10", "20")  # eth0 only: lo and ifb0 skipped
    assert (rows[-1]["if_tx_bytes"], rows[-1]["if_rx_bytes"]) == ("1010", "2020")


def test_stats_describe_the_schedule(tmp_path):
    s = TrafficSampler(NodeMetrics("worker0", "worker"), tmp_path / "t.csv", interval_s=0.002, interfaces=[])
    s.start()
    assert s.wait_samples(20, timeout_s=10)
    s.stop()
    st = s.stats()
    assert st.bins >= 19  # the last row, cut short by stop(), is not a scheduled bin
    assert st.bins + st.skipped_ticks >= 19
    assert 0 < st.min_interval_s <= st.mean_interval_s <= st.max_interval_s
    assert st.max_lateness_s >= st.mean_lateness_s >= 0


def test_lifecycle(tmp_path):
    s = TrafficSampler(NodeMetrics("worker0", "worker"), tmp_path / "deep" / "t.csv", interfaces=[])
    assert not s.wait_samples(1, timeout_s=0)  # not started
    s.start()
    with pytest.raises(RuntimeError, match="already started"):
        s.start()
    s.stop()
    s.stop()  # idempotent
    assert not s.wait_samples(s.samples + 1, timeout_s=10)  # ended: returns at once
    assert len(read_rows(tmp_path / "deep" / "t.csv")) == s.samples >= 1


def test_a_failing_sampler_is_reported_at_stop(tmp_path):
    class Broken(NodeMetrics):
        calls = 0

        def totals(self):
            self.calls += 1
            if self.calls > 1:
                raise OSError("boom")
            return 0, 0

    s = TrafficSampler(Broken("worker0", "worker"), tmp_path / "t.csv", interfaces=[]).start()
    assert not s.wait_samples(1, timeout_s=10)
    with pytest.raises(RuntimeError, match="boom"):
        s.stop()


def test_bad_interval_is_refused(tmp_path):
    with pytest.raises(ValueError, match="interval_s"):
        TrafficSampler(NodeMetrics("worker0", "worker"), tmp_path / "t.csv", interval_s=0)


def test_every_full_bin_is_exported_by_what_moved(tmp_path):
    m = NodeMetrics("worker0", "worker")
    with TrafficSampler(m, tmp_path / "traffic-worker0.csv", interval_s=0.005, interfaces=[]) as s:
        assert s.wait_samples(2, timeout_s=10)
        m.add_sent("ps0", "gradient", 1000)
        m.add_received("ps0", "params", 500)  # most likely in one bin: both; maybe split: tx, then rx
        assert s.wait_samples(s.samples + 2, timeout_s=10)
    count = {state: m.registry.get_sample_value("synclab_traffic_bins_total", {"node": "worker0", "state": state})
             for state in ("idle", "tx", "rx", "both")}
    assert count["idle"] >= 2
    assert count["both"] + min(count["tx"], count["rx"]) >= 1
    assert sum(count.values()) <= s.samples  # the last, stop-cut bin is not exported


def test_the_peak_rate_comes_from_the_interface_where_the_node_has_one(tmp_path, sys_net, write_counters):
    m = NodeMetrics("worker0", "worker", sys_net=sys_net)
    with TrafficSampler(m, tmp_path / "traffic.csv", interval_s=0.005) as s:
        assert s.wait_samples(2, timeout_s=10)
        write_counters(sys_net, "eth0", 10 + 50_000, 20)  # the link carried 50 kB; no payload was handed over
        assert s.wait_samples(s.samples + 2, timeout_s=10)
    peak = m.registry.get_sample_value("synclab_traffic_peak_bits_per_second", {"node": "worker0", "direction": "tx"})
    assert peak > 0  # from eth0's counter (payload alone would say 0)
    assert m.registry.get_sample_value("synclab_traffic_bins_total", {"node": "worker0", "state": "tx"}) == 0
