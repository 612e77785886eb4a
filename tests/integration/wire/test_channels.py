"""The job-token check of every gRPC service, against a live server on loopback."""

import hmac

import grpc
import pytest

from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel

TOKEN = "s3cret-token-0123456789"


@pytest.fixture
def port():
    node = NodeTransport("srv", TOKEN, on_message=lambda m: None)
    yield node.serve("127.0.0.1", 0, peer=True)
    node.close()


def _call(port: int, token: str):
    stub = rpc.PeerStub(open_channel(f"127.0.0.1:{port}", token, "caller"))
    return list(stub.Stream(iter([pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k"))]), timeout=5))


@pytest.mark.parametrize("wrong", ["s3cret-token-0123456780", "S3cret-token-0123456789", "x" * len(TOKEN)])
def test_wrong_token_of_the_same_length_is_refused(port, wrong):
    assert len(wrong) == len(TOKEN)
    with pytest.raises(grpc.RpcError) as e:
        _call(port, wrong)
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_right_token_is_let_in(port):
    assert _call(port, TOKEN) == []


def test_token_is_compared_in_constant_time(port, monkeypatch):
    """The check goes through hmac.compare_digest, not ==, so its time does not leak a prefix."""
    calls = []
    real = hmac.compare_digest
    monkeypatch.setattr(hmac, "compare_digest", lambda a, b: calls.append((a, b)) or real(a, b))
    with pytest.raises(grpc.RpcError):
        _call(port, "s3cret-token-0123456780")
    assert (b"s3cret-token-0123456780", TOKEN.encode()) in calls
