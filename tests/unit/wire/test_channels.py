"""The job-token check of every gRPC service, against a live server on loopback."""

import hmac

import grpc
import pytest

from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc
from synclab.wire.channels import TokenAuthInterceptor, open_channel

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


def test_empty_token_is_rejected_at_construction():
    with pytest.raises(ValueError, match="empty job token"):
        TokenAuthInterceptor("")


def test_http2_frames_hold_a_whole_chunk_within_the_rfc_bounds():
    from synclab.wire.channels import channel_options, http2_frame_bytes, server_options
    from synclab.wire.frames import HEADER_SLACK_BYTES

    assert http2_frame_bytes(4 << 20) == (4 << 20) + HEADER_SLACK_BYTES
    assert http2_frame_bytes(1 << 30) == (1 << 24) - 1  # RFC 9113 §6.5.2 ceiling
    assert http2_frame_bytes(1 << 20) is None  # shaped links' 1 MiB frames keep gRPC's default (measured)
    for opts in (channel_options(4 << 20), server_options(4 << 20)):
        assert dict(opts)["grpc.http2.max_frame_size"] == (4 << 20) + HEADER_SLACK_BYTES
    for opts in (channel_options(1 << 20), server_options(1 << 20)):
        assert "grpc.http2.max_frame_size" not in dict(opts)


def test_large_http2_frames_start_at_the_fast_links_chunk():
    from synclab.wire.frames import FAST_CHUNK_BYTES
    from synclab.wire.channels import LARGE_FRAMES_FROM_CHUNK_BYTES

    assert LARGE_FRAMES_FROM_CHUNK_BYTES == FAST_CHUNK_BYTES
