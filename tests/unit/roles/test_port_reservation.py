"""A node's ports stay its own from the moment they are chosen (the reservation; no server binds here).

gRPC and the metrics exporter binding the reserved port are tested in tests/integration/roles."""

import socket

import pytest

from synclab.roles.bootstrap import reserve_port


def test_a_reserved_port_cannot_be_taken_by_a_plain_bind():
    hold = reserve_port("127.0.0.1")
    try:
        port = hold.getsockname()[1]
        with socket.socket() as other, pytest.raises(OSError):
            other.bind(("127.0.0.1", port))
    finally:
        hold.close()


def test_a_crashed_nodes_last_log_line_joins_the_failure_reason(tmp_path):
    from synclab.roles.launcher import _last_words

    log = tmp_path / "worker0.log"
    log.write_text("Traceback (most recent call last):\n  ...\nRuntimeError: Failed to bind to address 10.0.0.3:1\n\n")
    assert _last_words(log) == ": RuntimeError: Failed to bind to address 10.0.0.3:1"
    assert _last_words(tmp_path / "absent.log") == ""
