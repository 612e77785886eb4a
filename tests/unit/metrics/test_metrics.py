import csv
import urllib.request

from prometheus_client import generate_latest

from synclab.metrics import NodeMetrics, TrafficSampler, interface_counters, serve


def test_counters_and_totals_in_exposition():
    m = NodeMetrics("worker0", "worker")
    m.add_sent("ps0", "gradient", 100)
    m.add_sent("ps1", "gradient", 50)
    m.add_received("ps0", "params", 7)
    m.observe_iteration(0.2, 0.15, 0.05, 32, 1.5)
    m.set_link_rate("egress", 1e9)
    m.set_backend("app")
    text = generate_latest(m.registry).decode()
    assert 'synclab_bytes_sent_total{kind="gradient",node="worker0",peer="ps0",role="worker"} 100.0' in text
    assert 'synclab_bytes_received_total{kind="params",node="worker0",peer="ps0",role="worker"} 7.0' in text
    assert 'synclab_samples_total{node="worker0"} 32.0' in text
    assert 'synclab_link_rate_bits_per_second{direction="egress",node="worker0"} 1e+09' in text
    assert 'synclab_network_backend_info{backend="app",node="worker0"} 1.0' in text
    assert "synclab_iteration_seconds_bucket" in text and "synclab_interface_transmit_bytes_total" in text
    assert m.total_sent() == 150 and m.sent_by_peer() == {"ps0": 100, "ps1": 50} and m.total_received() == 7


def test_two_nodes_in_one_process_do_not_clash():
    a, b = NodeMetrics("worker0", "worker"), NodeMetrics("worker1", "worker")
    a.add_sent("x", "k", 1)
    assert b.total_sent() == 0
    assert "worker0" not in generate_latest(b.registry).decode()


def test_exporter_answers_over_http():
    m = NodeMetrics("ps0", "ps")
    m.add_sent("worker0", "params", 42)
    exp = serve(m, host="127.0.0.1", port=0)
    try:
        body = urllib.request.urlopen(f"http://127.0.0.1:{exp.port}/metrics", timeout=5).read().decode()
    finally:
        exp.stop()
    assert 'synclab_bytes_sent_total{kind="params",node="ps0",peer="worker0",role="ps"} 42.0' in body


def test_interface_counters_read_sysfs(tmp_path):
    for name, tx, rx in (("eth0", 10, 20), ("lo", 1, 2)):
        d = tmp_path / name / "statistics"
        d.mkdir(parents=True)
        (d / "tx_bytes").write_text(f"{tx}\n")
        (d / "rx_bytes").write_text(f"{rx}\n")
    assert interface_counters(root=tmp_path) == {"eth0": (10, 20)}
    assert interface_counters(["lo"], root=tmp_path) == {"lo": (1, 2)}


def test_sampler_rows_track_totals(tmp_path):
    m = NodeMetrics("worker0", "worker")
    path = tmp_path / "traffic-worker0.csv"
    s = TrafficSampler(m, path, interval_s=0.01).start()
    m.add_sent("p", "k", 1000)
    m.add_received("p", "k", 500)
    import time
    time.sleep(0.1)
    m.add_sent("p", "k", 24)
    s.stop()
    rows = list(csv.DictReader(path.open()))
    assert len(rows) >= 5
    assert int(rows[-1]["tx_bytes"]) == 1024 and int(rows[-1]["rx_bytes"]) == 500
    t = [float(r["t_s"]) for r in rows]
    assert t == sorted(t)
    # bits per bin add back up to the bytes sent
    total_bits = sum(float(r["tx_bps"]) * (b - a) for r, a, b in zip(rows[1:], t, t[1:]))
    assert abs(total_bits / 8 - (1024 - int(rows[0]["tx_bytes"]))) < 2
