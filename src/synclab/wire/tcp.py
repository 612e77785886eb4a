"""The raw-TCP data-plane engine's wire: a hello, then length-prefixed ``synclab.v1`` frames.

With ``transport.engine: tcp`` a data-plane stream is one TCP connection instead
of a gRPC bidirectional stream; the frames on it are the very bytes gRPC would
carry (:mod:`synclab.wire.codec`), so the wire contract ``synclab.v1`` is
unchanged. What gRPC gave the stream and what replaces it here:

* authentication (``x-synclab-token`` / ``x-synclab-node`` metadata): the
  opener's :func:`hello` names the wire contract, the job token, its node and
  the service ('ps' or 'peer'); the acceptor answers with :func:`accept_reply`
  or :func:`refuse_reply` and closes. A peer with another contract version or
  a wrong token is refused with a clear error (:class:`HelloRefused`) on both
  sides; the token is compared in constant time.
* message framing and size limits (``max_receive_message_length``): each
  record is a 5-byte header (kind, big-endian u32 length) and its body; a frame
  record longer than ``max_frame_bytes`` (a chunk plus header slack, as gRPC's
  limit) is refused (:class:`~synclab.wire.frames.FrameError`) before a byte of
  it is read, and a body that is not a Frame is refused as malformed.
* ``INVALID_ARGUMENT`` on a refused stream: an abort record carrying the reason,
  then the acceptor stops; the opener's reader raises :class:`StreamAborted`.
* HTTP/2 flow control: TCP's own (a writer blocks in ``sendmsg`` while the
  peer's window is full, and the link's scheduler bounds what waits behind it).
* the end of a stream (half-close): an end record, then ``shutdown(SHUT_WR)``
  (:func:`send_end`). EOF without an end record (a crashed peer's kernel closes
  its sockets too), EOF inside a record, or a socket error is
  :class:`StreamBroken` (what ``grpc.RpcError`` is on the gRPC engine).

Copies: a record goes out in one ``sendmsg`` of its header and the frame's
encoded bytes (no join); a reader receives with ``recv_into`` one buffer
allocated once per connection, and the frame's payload stays a view into it
(:func:`~synclab.wire.codec.decode_frame`) until the next record is read.
"""

from __future__ import annotations

import hmac
import json
import socket
import struct
from typing import Iterator

from synclab.wire.codec import MalformedFrame, WireFrame, decode_frame, encode_frame
from synclab.wire.frames import FrameError

WIRE_CONTRACT = "synclab.v1"  # protos/synclab/v1/synclab.proto's package
MAGIC = b"SYNCLAB\x00"
HELLO_MAX_BYTES = 4096
_HELLO_HEAD = struct.Struct(">8sI")
RECORD = struct.Struct(">BI")  # kind, body length
FRAME_RECORD, ABORT_RECORD, END_RECORD = 0, 1, 2
ABORT_MAX_BYTES = 64 << 10
SERVICES = ("ps", "peer")


class HelloRefused(ConnectionError):
    """The other end refused this connection (or sent a hello that cannot be accepted)."""


class StreamBroken(ConnectionError):
    """The connection ended inside a record or failed (the gRPC engine's ``RpcError``)."""


class StreamAborted(ConnectionError):
    """The other end refused a frame and ended the stream (the gRPC engine's ``INVALID_ARGUMENT``)."""


# -- hello ---------------------------------------------------------------------------------------------------
def _send_json(sock: socket.socket, obj: dict) -> None:
    body = json.dumps(obj).encode()
    if len(body) > HELLO_MAX_BYTES:
        raise ValueError(f"a hello of {len(body)} bytes exceeds {HELLO_MAX_BYTES}")
    sock.sendall(_HELLO_HEAD.pack(MAGIC, len(body)) + body)


def _recv_exact(sock: socket.socket, n: int, what: str) -> bytes:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise HelloRefused(f"the connection closed during the {what} ({got} of {n} bytes)")
        got += k
    return bytes(buf)


def _recv_json(sock: socket.socket, what: str) -> dict:
    magic, n = _HELLO_HEAD.unpack(_recv_exact(sock, _HELLO_HEAD.size, what))
    if magic != MAGIC:
        raise HelloRefused(f"the {what} does not start with SyncLab's TCP data-plane magic (got {magic!r}): "
                           f"not a SyncLab tcp-engine peer")
    if n > HELLO_MAX_BYTES:
        raise HelloRefused(f"a {what} of {n} bytes exceeds {HELLO_MAX_BYTES}")
    try:
        obj = json.loads(_recv_exact(sock, n, what))
    except ValueError as e:
        raise HelloRefused(f"unreadable {what}: {e}") from None
    if not isinstance(obj, dict):
        raise HelloRefused(f"unreadable {what}: not an object")
    return obj


def hello(sock: socket.socket, token: str, node: str, service: str, contract: str = WIRE_CONTRACT) -> None:
    """The opener's hello: contract version, job token, node name, service."""
    _send_json(sock, {"contract": contract, "token": token, "node": node, "service": service})


def read_hello(sock: socket.socket, token: str, services: tuple[str, ...]) -> tuple[str, str]:
    """The acceptor reads and checks a hello: ``(node, service)``, or :class:`HelloRefused` (send the reason
    back with :func:`refuse_reply`)."""
    h = _recv_json(sock, "hello")
    contract = h.get("contract")
    if contract != WIRE_CONTRACT:
        raise HelloRefused(f"the peer speaks wire contract {contract!r}; this node speaks {WIRE_CONTRACT!r}")
    offered = h.get("token")
    if not isinstance(offered, str) or not hmac.compare_digest(offered.encode(), token.encode()):
        raise HelloRefused("missing or wrong job token")
    node, service = h.get("node"), h.get("service")
    if not isinstance(node, str) or not node:
        raise HelloRefused("the hello names no node")
    if service not in services:
        raise HelloRefused(f"service {service!r} is not served here (served: {', '.join(services) or 'none'})")
    return node, service


def accept_reply(sock: socket.socket) -> None:
    _send_json(sock, {"contract": WIRE_CONTRACT, "ok": True})


def refuse_reply(sock: socket.socket, reason: str) -> None:
    _send_json(sock, {"contract": WIRE_CONTRACT, "ok": False, "error": reason})


def read_reply(sock: socket.socket) -> None:
    """The opener reads the acceptor's answer; :class:`HelloRefused` with its reason when refused."""
    r = _recv_json(sock, "hello reply")
    if r.get("ok") is not True:
        raise HelloRefused(f"refused: {r.get('error', 'no reason given')} (peer contract {r.get('contract')!r})")


# -- records -------------------------------------------------------------------------------------------------
def _send_parts(sock: socket.socket, parts: list) -> None:
    """``sendmsg`` of all ``parts``, resumed where a short send stopped."""
    total = sum(len(p) for p in parts)
    sent = sock.sendmsg(parts)
    if sent == total:
        return
    for p in parts:
        n = len(p)
        if sent >= n:
            sent -= n
            continue
        sock.sendall(memoryview(p)[sent:])
        sent = 0


def send_frame(sock: socket.socket, frame) -> int:
    """One frame record: its header and the frame's encoded bytes in one ``sendmsg``; the bytes sent."""
    body = encode_frame(frame)
    _send_parts(sock, [RECORD.pack(FRAME_RECORD, len(body)), body])
    return RECORD.size + len(body)


def send_end(sock: socket.socket) -> None:
    """End this direction of the stream: an end record, then the half-close."""
    sock.sendall(RECORD.pack(END_RECORD, 0))
    sock.shutdown(socket.SHUT_WR)


def send_abort(sock: socket.socket, reason: str) -> None:
    body = reason.encode()[:ABORT_MAX_BYTES]
    _send_parts(sock, [RECORD.pack(ABORT_RECORD, len(body)), body])


class FrameReader:
    """Iterate the frames of one connection until the other end half-closes.

    ``max_frame_bytes``: the largest frame record accepted (a chunk plus header slack); the receive buffer is
    allocated once at that size. A frame's payload is a view into the buffer, valid until the next frame is
    read. ``broken``: called at EOF to ask whether the connection was torn down by this end's writer (then
    the EOF is :class:`StreamBroken`, not a clean end).
    """

    def __init__(self, sock: socket.socket, max_frame_bytes: int, broken=lambda: None):
        if max_frame_bytes <= 0:
            raise ValueError(f"max_frame_bytes must be positive, got {max_frame_bytes}")
        self._sock, self.max_frame_bytes, self._broken = sock, max_frame_bytes, broken
        self._buf = bytearray(max_frame_bytes)
        self._view = memoryview(self._buf)
        self._head = bytearray(RECORD.size)

    def _fill(self, view: memoryview, n: int, what: str) -> None:
        """Read exactly ``n`` bytes into ``view``."""
        got = 0
        while got < n:
            try:
                k = self._sock.recv_into(view[got:n])
            except OSError as e:
                raise StreamBroken(f"the connection failed: {e}") from None
            if k == 0:
                err = self._broken()
                if err is not None:
                    raise StreamBroken(f"the connection was torn down: {err}")
                if what == "record header" and got == 0:
                    raise StreamBroken("the peer closed the connection without ending the stream (crashed, or "
                                       "not a SyncLab tcp-engine peer)")
                raise StreamBroken(f"the connection closed inside a {what} ({got} of {n} bytes): truncated")
            got += k

    def __iter__(self) -> Iterator[WireFrame]:
        head = memoryview(self._head)
        while True:
            self._fill(head, RECORD.size, "record header")
            kind, n = RECORD.unpack(self._head)
            if kind == END_RECORD:
                return
            if kind == ABORT_RECORD:
                if n > ABORT_MAX_BYTES:
                    raise FrameError(f"an abort record of {n} bytes exceeds {ABORT_MAX_BYTES}")
                body = bytearray(n)
                self._fill(memoryview(body), n, "abort record")
                raise StreamAborted(f"the peer refused a frame and ended the stream: "
                                    f"{body.decode(errors='replace')}")
            if kind != FRAME_RECORD:
                raise FrameError(f"unknown record kind {kind} on a tcp data-plane stream")
            if n > self.max_frame_bytes:
                raise FrameError(f"a frame of {n} bytes exceeds this node's {self.max_frame_bytes}-byte frame "
                                 f"limit (transport.chunk_bytes plus header slack)")
            self._fill(self._view, n, "frame")
            try:
                frame = decode_frame(self._view[:n])
            except MalformedFrame as e:
                raise FrameError(f"malformed frame: {e}") from None
            yield frame
