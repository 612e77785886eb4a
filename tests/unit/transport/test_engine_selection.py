"""Choosing the data-plane engine (transport.engine: grpc or tcp) and reaching a peer that is not there.

Streams over the tcp engine are tested in tests/integration/transport/test_tcp_engine.py."""

import pytest

from synclab.transport.node import NodeTransport, PeerUnreachable, stream_address
from synclab.wire import pb

TOKEN = "t0ken"


def test_unreachable_peer_fails_within_timeout():
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, connect_timeout_s=0.5, engine="tcp")
    with pytest.raises(PeerUnreachable, match="unreachable over tcp"):
        a.connect("ghost", "127.0.0.1:1", "peer")


def test_unknown_engine_is_refused():
    with pytest.raises(ValueError, match="unknown data-plane engine 'udp'"):
        NodeTransport("a", TOKEN, on_message=lambda m: None, engine="udp")


def test_stream_address_picks_the_engines_port():
    n = pb.NodeInfo(name="w1", address="10.0.0.2:5000", capabilities=["x", "tcp-data-port=5123"])
    assert stream_address(n, "grpc") == "10.0.0.2:5000"
    assert stream_address(n, "tcp") == "10.0.0.2:5123"
    with pytest.raises(PeerUnreachable, match="w1 advertises no tcp data-plane port"):
        stream_address(pb.NodeInfo(name="w1", address="10.0.0.2:5000"), "tcp")
