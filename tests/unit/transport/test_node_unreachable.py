"""A NodeTransport that cannot reach its peer says so within its connect timeout (nothing listens)."""

import pytest

from synclab.transport.node import NodeTransport, PeerUnreachable

TOKEN = "t0ken"


def test_unreachable_peer_fails_within_timeout():
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, connect_timeout_s=0.5)
    with pytest.raises(PeerUnreachable, match="unreachable"):
        a.connect("ghost", "127.0.0.1:1", "peer")
