import urllib.error
import urllib.request

import pytest

from synclab.metrics import NodeMetrics, serve, stop


def scrape(port: int) -> str:
    return urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()


def test_exporter_answers_over_http_until_stopped():
    m = NodeMetrics("ps0", "ps")
    m.add_sent("worker0", "params", 42)
    port = serve(m, host="127.0.0.1", port=0)
    try:
        assert port > 0
        body = scrape(port)
        assert 'synclab_bytes_sent_total{kind="params",node="ps0",peer="worker0",role="ps"} 42.0' in body
        m.add_sent("worker0", "params", 8)
        assert 'peer="worker0",role="ps"} 50.0' in scrape(port)  # read at scrape time
    finally:
        stop(m)
    with pytest.raises(urllib.error.URLError):
        scrape(port)
    stop(m)  # idempotent


def test_two_nodes_serve_their_own_registries():
    a, b = NodeMetrics("worker0", "worker"), NodeMetrics("worker1", "worker")
    a.add_sent("ps0", "gradient", 1)
    b.add_sent("ps0", "gradient", 2)
    ports = serve(a, "127.0.0.1"), serve(b, "127.0.0.1")
    try:
        assert ports[0] != ports[1]
        body_a, body_b = scrape(ports[0]), scrape(ports[1])
    finally:
        stop(a)
        stop(b)
    assert 'node="worker0"' in body_a and 'node="worker1"' not in body_a
    assert 'node="worker1"' in body_b and 'node="worker0"' not in body_b
