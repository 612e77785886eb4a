"""A node's ports stay its own from the moment they are chosen until its servers bind them."""

import socket

import pytest
from prometheus_client import CollectorRegistry

from synclab.metrics.exporter import Exporter
from synclab.roles.bootstrap import reserve_port
from synclab.wire.channels import bind, make_server


def test_a_reserved_port_cannot_be_taken_by_a_plain_bind():
    hold = reserve_port("127.0.0.1")
    try:
        port = hold.getsockname()[1]
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
    finally:
        hold.close()


def test_grpc_binds_the_reserved_port_while_it_is_held():
    hold = reserve_port("127.0.0.1")
    port = hold.getsockname()[1]
    server = make_server("token", 4, 1 << 20)
    try:
        assert bind(server, f"127.0.0.1:{port}", tls=None) == port
        server.start()
    finally:
        hold.close()
        server.stop(None)


def test_the_metrics_exporter_binds_the_reserved_port_while_it_is_held():
    hold = reserve_port("127.0.0.1")
    port = hold.getsockname()[1]
    try:
        with Exporter(CollectorRegistry(), "127.0.0.1", port) as exporter:
            assert exporter.port == port
    finally:
        hold.close()


def test_a_crashed_nodes_last_log_line_joins_the_failure_reason(tmp_path):
    from synclab.roles.launcher import _last_words

    log = tmp_path / "worker0.log"
    log.write_text("Traceback (most recent call last):\n  ...\nRuntimeError: Failed to bind to address 10.0.0.3:1\n\n")
    assert _last_words(log) == ": RuntimeError: Failed to bind to address 10.0.0.3:1"
    assert _last_words(tmp_path / "absent.log") == ""
