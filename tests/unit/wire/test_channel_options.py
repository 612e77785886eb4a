"""The job-token interceptor's construction and the HTTP/2 options of channels and servers (no server).

The token check against a live server is tested in tests/integration/wire/test_channels.py."""

import pytest

from synclab.wire.channels import TokenAuthInterceptor


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
    from synclab.wire.channels import LARGE_FRAMES_FROM_CHUNK_BYTES
    from synclab.wire.frames import FAST_CHUNK_BYTES

    assert LARGE_FRAMES_FROM_CHUNK_BYTES == FAST_CHUNK_BYTES
