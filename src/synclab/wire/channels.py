"""gRPC channel/server options and the shared-token authentication.

Message-size limits are explicit on every channel and server (a full chunk plus
header slack); keepalive pings detect dead peers on long-lived streams.

Keepalive timeout. gRPC core also sets it as the socket's TCP_USER_TIMEOUT: a
connection whose sent data stays unacknowledged that long is dropped by the
kernel (ETIMEDOUT). On an emulated link with drop-tail queues and many senders
converging on one PS shard, a flow can spend several seconds in retransmission
backoff (measured: 16 workers on 250 Mbit/s links killed streams with a 5 s
timeout), so the timeout is 60 s: a crashed peer is still noticed at once (its
kernel resets the connection), a hung one through the coordinator's heartbeats.

Time dilation. Under ``run.dilation`` D the data plane runs D times slower, so a
ping answered behind queued data takes D times longer (measured: 16 workers at
D = 32 lost streams to ping timeouts). Data-plane channels and servers are made
with ``keepalive_scale=D`` (``NodeTransport(keepalive_scale=...)``), which
stretches keepalive interval and timeout by D; the control plane keeps 1.
"""

from __future__ import annotations

import collections
import hmac

import grpc

from synclab.wire import pb
from synclab.wire.codec import decode_frame, encode_frame
from synclab.wire.frames import DEFAULT_CHUNK_BYTES, HEADER_SLACK_BYTES
from synclab.wire.frames import FAST_CHUNK_BYTES as LARGE_FRAMES_FROM_CHUNK_BYTES  # the fast links' frames
from synclab.wire.tls import CLUSTER_NAME, TlsFiles

TOKEN_KEY = "x-synclab-token"
NODE_KEY = "x-synclab-node"
KEEPALIVE_TIME_MS = 20_000
KEEPALIVE_TIMEOUT_MS = 60_000  # also TCP_USER_TIMEOUT (see above)
HTTP2_MIN_FRAME_BYTES = 1 << 14  # RFC 9113 §6.5.2 SETTINGS_MAX_FRAME_SIZE bounds
HTTP2_MAX_FRAME_BYTES = (1 << 24) - 1


def http2_frame_bytes(chunk_bytes: int) -> int | None:
    """The largest HTTP/2 DATA frame this end accepts (SETTINGS_MAX_FRAME_SIZE), or None for gRPC's 16 KiB.

    With the fast links' frames (``chunk_bytes`` ≥ 4 MiB, ``transport.chunk_bytes: auto`` unshaped): one whole
    chunk with its header (RFC 9113 §6.5.2 allows 16 KiB to 16 MiB − 1), so a gRPC message travels in one
    DATA frame instead of 256 and the receiver hands grpcio one slice to turn into ``bytes`` instead of 256.
    Measured side by side (benchmarks/allreduce_vs_gloo.py --baseline-src, 4 ranks): with 1 MiB frames,
    3-5 % less CPU per GB unshaped but 5 % more at 1 Gbit/s (tbf), time unchanged; so shaped links, whose
    frames stay 1 MiB, keep gRPC's default."""
    if chunk_bytes < LARGE_FRAMES_FROM_CHUNK_BYTES:
        return None
    return max(HTTP2_MIN_FRAME_BYTES, min(HTTP2_MAX_FRAME_BYTES, chunk_bytes + HEADER_SLACK_BYTES))


def _common_options(chunk_bytes: int, keepalive_scale: float) -> list[tuple[str, int]]:
    if not keepalive_scale > 0:
        raise ValueError(f"keepalive_scale must be > 0, got {keepalive_scale!r}")
    limit = chunk_bytes + HEADER_SLACK_BYTES
    timeout_ms = int(KEEPALIVE_TIMEOUT_MS * keepalive_scale)
    frame = http2_frame_bytes(chunk_bytes)
    return [
        ("grpc.max_send_message_length", limit),
        ("grpc.max_receive_message_length", limit),
        # Whole chunks per HTTP/2 DATA frame with the fast links' 4 MiB chunks (http2_frame_bytes; CHANGELOG.md
        # "The data plane beside gloo"). The wire contract (synclab.v1 frames) is untouched: this is HTTP/2 framing
        # below it.
        *([("grpc.http2.max_frame_size", frame)] if frame else []),
        ("grpc.keepalive_time_ms", int(KEEPALIVE_TIME_MS * keepalive_scale)),
        ("grpc.keepalive_timeout_ms", timeout_ms),
        # Since gRPC core 1.60 (grpc/grpc#34647) every ping, keepalive or BDP probe, is bounded by this
        # separate timeout (default 60 s), which wins over keepalive_timeout_ms: without it the scaled
        # timeout above never took effect and D = 32 runs lost their streams to "ping timeout".
        ("grpc.http2.ping_timeout_ms", timeout_ms),
        ("grpc.keepalive_permit_without_calls", 1),
    ]


def channel_options(chunk_bytes: int = DEFAULT_CHUNK_BYTES, *, keepalive_scale: float = 1.0) -> list[tuple[str, int]]:
    """Options of a client channel; ``keepalive_scale`` stretches keepalive interval and timeout (see module doc)."""
    return _common_options(chunk_bytes, keepalive_scale) + [("grpc.http2.max_pings_without_data", 0),
                                                            ("grpc.enable_http_proxy", 0)]


def server_options(chunk_bytes: int = DEFAULT_CHUNK_BYTES, *, keepalive_scale: float = 1.0) -> list[tuple[str, int]]:
    """Options of a server; ``keepalive_scale`` as for :func:`channel_options`."""
    return _common_options(chunk_bytes, keepalive_scale) + [("grpc.http2.min_ping_interval_without_data_ms", 5_000),
                                                            ("grpc.so_reuseport", 0)]


class TokenAuthInterceptor(grpc.ServerInterceptor):
    """Refuse every call whose ``x-synclab-token`` metadata is not the job token."""

    def __init__(self, token: str):
        if not token:
            raise ValueError("an empty job token would let anyone in")
        self._token = token.encode()

        def deny(request, context):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, "missing or wrong x-synclab-token")

        self._deny = {
            (False, False): grpc.unary_unary_rpc_method_handler(deny),
            (False, True): grpc.unary_stream_rpc_method_handler(deny),
            (True, False): grpc.stream_unary_rpc_method_handler(deny),
            (True, True): grpc.stream_stream_rpc_method_handler(deny),
        }

    def intercept_service(self, continuation, handler_call_details):
        md = dict(handler_call_details.invocation_metadata or ())
        offered = md.get(TOKEN_KEY, "")
        offered = offered.encode() if isinstance(offered, str) else bytes(offered)
        if hmac.compare_digest(offered, self._token):  # constant time: no timing oracle on the token
            return continuation(handler_call_details)
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        return self._deny[(handler.request_streaming, handler.response_streaming)]


class _ClientCallDetails(collections.namedtuple("_D", "method timeout metadata credentials wait_for_ready compression"),
                         grpc.ClientCallDetails):
    pass


class MetadataInterceptor(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                          grpc.StreamUnaryClientInterceptor, grpc.StreamStreamClientInterceptor):
    """Attach the job token and the caller's node name to every outgoing call."""

    def __init__(self, token: str, node: str):
        self._md = ((TOKEN_KEY, token), (NODE_KEY, node))

    def _details(self, d):
        md = tuple(d.metadata or ()) + self._md
        return _ClientCallDetails(d.method, d.timeout, md, d.credentials, d.wait_for_ready, d.compression)

    def intercept_unary_unary(self, continuation, d, request):
        return continuation(self._details(d), request)

    def intercept_unary_stream(self, continuation, d, request):
        return continuation(self._details(d), request)

    def intercept_stream_unary(self, continuation, d, request_iterator):
        return continuation(self._details(d), request_iterator)

    def intercept_stream_stream(self, continuation, d, request_iterator):
        return continuation(self._details(d), request_iterator)


def _tls(tls: TlsFiles | None | str) -> TlsFiles | None:
    """``"env"``: the files under ``$SYNCLAB_TLS_DIR`` (:mod:`synclab.wire.tls`), else what is given."""
    return TlsFiles.from_env() if isinstance(tls, str) else tls


def open_channel(address: str, token: str, node: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES, *,
                 keepalive_scale: float = 1.0, tls: TlsFiles | None | str = "env") -> grpc.Channel:
    """A channel that authenticates with the job token: plain on a private cluster network, mutual TLS when
    the process has the cluster's TLS files (``tls``, by default ``$SYNCLAB_TLS_DIR``)."""
    options = channel_options(chunk_bytes, keepalive_scale=keepalive_scale)
    files = _tls(tls)
    if files is None:
        channel = grpc.insecure_channel(address, options=options)
    else:  # certificates name the cluster, not hosts (synclab.wire.tls)
        channel = grpc.secure_channel(address, files.channel_credentials(),
                                      options=options + [("grpc.ssl_target_name_override", CLUSTER_NAME)])
    return grpc.intercept_channel(channel, MetadataInterceptor(token, node))


def bind(server: grpc.Server, address: str, tls: TlsFiles | None | str = "env") -> int:
    """Listen on ``address`` (plain, or mutual TLS as :func:`open_channel` decides); the port, 0 on failure."""
    files = _tls(tls)
    try:
        if files is None:
            return server.add_insecure_port(address)
        return server.add_secure_port(address, files.server_credentials())
    except RuntimeError:  # grpcio raises where older versions returned 0: not this host's address, or taken
        return 0


def caller_node(context: grpc.ServicerContext) -> str:
    for k, v in context.invocation_metadata():
        if k == NODE_KEY:
            return v
    return ""


def make_server(token: str, max_workers: int, chunk_bytes: int = DEFAULT_CHUNK_BYTES, *,
                keepalive_scale: float = 1.0) -> grpc.Server:
    """A server whose RPCs each hold one of ``max_workers`` threads; one past that is refused at once with
    ``RESOURCE_EXHAUSTED`` (back-pressure a client sees) rather than queued without bound."""
    from concurrent.futures import ThreadPoolExecutor

    return grpc.server(ThreadPoolExecutor(max_workers=max_workers), interceptors=[TokenAuthInterceptor(token)],
                       options=server_options(chunk_bytes, keepalive_scale=keepalive_scale),
                       maximum_concurrent_rpcs=max_workers)




# -- the data plane's streams, with the frame codec (synclab.wire.codec) instead of generated serializers --------
# The method paths are the ones the generated code of protos/synclab/v1/synclab.proto uses: same contract, same
# bytes; only the copies differ.
PEER_SERVICE = "synclab.v1.Peer"
PS_SERVICE = "synclab.v1.ParameterServer"


def peer_stream_handlers(stream) -> grpc.GenericRpcHandler:
    """``Peer.Stream`` served by ``stream(request_iterator, context)``."""
    return grpc.method_handlers_generic_handler(PEER_SERVICE, {
        "Stream": grpc.stream_stream_rpc_method_handler(stream, request_deserializer=decode_frame,
                                                        response_serializer=encode_frame)})


def ps_stream_handlers(stream, pull) -> grpc.GenericRpcHandler:
    """``ParameterServer.Stream`` and the unary-request ``Pull`` (both answer with frames)."""
    return grpc.method_handlers_generic_handler(PS_SERVICE, {
        "Stream": grpc.stream_stream_rpc_method_handler(stream, request_deserializer=decode_frame,
                                                        response_serializer=encode_frame),
        "Pull": grpc.unary_stream_rpc_method_handler(pull, request_deserializer=pb.PullRequest.FromString,
                                                     response_serializer=encode_frame)})


def open_stream(channel: grpc.Channel, service: str):
    """The callable that opens ``service``'s ('ps' or 'peer') long-lived frame stream on ``channel``."""
    name = PS_SERVICE if service == "ps" else PEER_SERVICE
    return channel.stream_stream(f"/{name}/Stream", request_serializer=encode_frame,
                                 response_deserializer=decode_frame)
