import threading

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from synclab.metrics import NodeMetrics


def exposition(m: NodeMetrics) -> str:
    return generate_latest(m.registry).decode()


def test_metrics_appear_in_the_text_exposition(sys_net):
    m = NodeMetrics("worker0", "worker", sys_net=sys_net)
    m.add_sent("ps0", "gradient", 100)
    m.add_sent("ps1", "gradient", 50)
    m.add_received("ps0", "params", 7)
    m.observe_iteration(0.2, 0.15, 0.05, 32, 1.5)
    m.set_queue_bytes("ps0", "0", 4096)
    m.set_link_rate("egress", 1e9)
    m.set_backend("htb")
    m.observe_aggregation(0.003)
    text = exposition(m)
    for line in (
        'synclab_bytes_sent_total{kind="gradient",node="worker0",peer="ps0",role="worker"} 100.0',
        'synclab_bytes_sent_total{kind="gradient",node="worker0",peer="ps1",role="worker"} 50.0',
        'synclab_bytes_received_total{kind="params",node="worker0",peer="ps0",role="worker"} 7.0',
        'synclab_iteration_seconds_count{node="worker0",role="worker"} 1.0',
        'synclab_compute_seconds_total{node="worker0"} 0.15',
        'synclab_comm_wait_seconds_total{node="worker0"} 0.05',
        'synclab_samples_total{node="worker0"} 32.0',
        'synclab_training_loss{node="worker0"} 1.5',
        'synclab_send_queue_bytes{node="worker0",peer="ps0",priority_band="0"} 4096.0',
        'synclab_link_rate_bits_per_second{direction="egress",node="worker0"} 1e+09',
        'synclab_network_backend_info{backend="htb",node="worker0"} 1.0',
        'synclab_ps_aggregation_seconds_count{node="worker0"} 1.0',
        'synclab_interface_transmit_bytes_total{interface="eth0",node="worker0"} 10.0',
        'synclab_interface_receive_bytes_total{interface="eth0",node="worker0"} 20.0',
    ):
        assert line in text, line
    assert 'interface="ifb0"' not in text and 'interface="lo"' not in text


def test_iteration_buckets_span_1ms_to_100s():
    text = exposition(NodeMetrics("worker0", "worker"))
    assert 'synclab_iteration_seconds_bucket{le="0.001",node="worker0",role="worker"}' not in text  # no sample yet
    m = NodeMetrics("worker0", "worker")
    m.observe_iteration(0.0005, 0, 0, 1, 0)
    text = exposition(m)
    assert 'synclab_iteration_seconds_bucket{le="0.001",node="worker0",role="worker"} 1.0' in text
    assert 'synclab_iteration_seconds_bucket{le="100.0",node="worker0",role="worker"} 1.0' in text


def test_backend_info_keeps_only_the_current_backend():
    m = NodeMetrics("worker0", "worker")
    m.set_backend("netem")
    m.set_backend("app")
    text = exposition(m)
    assert 'backend="app"' in text and 'backend="netem"' not in text


def test_plain_totals_track_bytes_without_prometheus():
    m = NodeMetrics("worker0", "worker")
    m.add_sent("ps0", "gradient", 100)
    m.add_sent("ps1", "gradient", 50)
    m.add_sent("ps0", "control", 1)
    m.add_received("ps0", "params", 7)
    assert m.totals() == (151, 7)
    assert m.total_sent() == 151 and m.total_received() == 7
    assert m.sent_by_peer() == {"ps0": 101, "ps1": 50}
    assert m.received_by_peer() == {"ps0": 7}


def test_negative_byte_count_is_refused_and_totals_stay():
    m = NodeMetrics("worker0", "worker")
    with pytest.raises(ValueError):
        m.add_sent("ps0", "gradient", -1)
    assert m.totals() == (0, 0) and m.sent_by_peer() == {}


def test_totals_are_exact_under_concurrent_adds():
    m = NodeMetrics("worker0", "worker")
    n_threads, n_adds = 8, 2000

    def add(i):
        for _ in range(n_adds):
            m.add_sent(f"peer{i % 2}", "gradient", 3)
            m.add_received(f"peer{i % 2}", "params", 1)

    threads = [threading.Thread(target=add, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert m.totals() == (3 * n_threads * n_adds, n_threads * n_adds)
    assert m.sent_by_peer() == {"peer0": 3 * n_adds * n_threads // 2, "peer1": 3 * n_adds * n_threads // 2}
    assert (f'synclab_bytes_sent_total{{kind="gradient",node="worker0",peer="peer0",role="worker"}} '
            f'{3 * n_adds * n_threads // 2}.0') in exposition(m)


def test_two_nodes_in_one_process_do_not_clash():
    a, b = NodeMetrics("worker0", "worker"), NodeMetrics("worker1", "worker")
    a.add_sent("ps0", "gradient", 1)
    b.add_sent("ps0", "gradient", 2)
    assert a.totals() == (1, 0) and b.totals() == (2, 0)
    assert 'node="worker1"' not in exposition(a)
    assert 'node="worker0"' not in exposition(b)
    assert 'node="worker1",peer="ps0",role="worker"} 2.0' in exposition(b)


def test_a_given_registry_is_used_and_guards_duplicates():
    registry = CollectorRegistry()
    m = NodeMetrics("ps0", "ps", registry)
    assert m.registry is registry
    with pytest.raises(ValueError):
        NodeMetrics("ps1", "ps", registry)  # one node's metrics per registry


def test_empty_node_name_is_refused():
    with pytest.raises(ValueError, match="node"):
        NodeMetrics("", "worker")


def test_sampler_bins_are_counted_by_what_moved_and_the_peak_resets_per_scrape(sys_net):
    m = NodeMetrics("ps0", "ps", sys_net=sys_net)
    for tx, rx in ((0, 0), (0, 0), (100, 0), (0, 50), (10, 10)):
        m.observe_bin(tx, rx, tx * 800.0, rx * 800.0)  # 10 ms bins: bytes x 8 / 0.01 s
    r = m.registry
    assert [r.get_sample_value("synclab_traffic_bins_total", {"node": "ps0", "state": s})
            for s in ("idle", "tx", "rx", "both")] == [2, 1, 1, 1]
    peak = {"node": "ps0", "direction": "tx"}
    assert r.get_sample_value("synclab_traffic_peak_bits_per_second", peak) == 80_000.0
    assert r.get_sample_value("synclab_traffic_peak_bits_per_second", peak) == 0.0  # read once, then it starts over
    m.observe_bin(1, 0, 800.0, 0.0)
    assert r.get_sample_value("synclab_traffic_peak_bits_per_second", peak) == 800.0
