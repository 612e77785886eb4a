"""A node's transport: its gRPC data-plane server, its links to peers, inbound reassembly.

Every node (worker or PS shard) has one :class:`NodeTransport`. Outgoing
streams are opened with :meth:`connect`; a PS shard answers each worker on the
reverse direction of the stream that worker opened (:meth:`reverse_link`).
Complete inbound messages go to ``on_message``; a frame that cannot be accepted
(:class:`~synclab.wire.frames.FrameError`, or a ``ValueError`` raised by
``on_message``) aborts that stream with ``INVALID_ARGUMENT``.

A refusal carries a status (:class:`~synclab.wire.frames.Refusal`): ``UNAVAILABLE``
for a message the node cannot take yet, ``PERMISSION_DENIED`` for a stream from a
node that is not one of its peers (:meth:`NodeTransport.set_peers`),
``ALREADY_EXISTS`` for a second stream under a name that has one open; any other
error is ``INVALID_ARGUMENT``. The tcp engine carries the status name at the head
of its abort record or hello refusal.

``limits`` (:class:`~synclab.wire.frames.MessageLimits`) bound what any one
peer can make this node hold; a role sets them from the plan
(:meth:`NodeTransport.set_limits`) before peers send data. A peer that breaks
them loses its stream; the server and every other stream carry on.

``sinks`` (the worker's :class:`~synclab.transport.inbox.Inbox`): messages
whose destination was named in advance (``Inbox.expect_into``) are written into
it chunk by chunk as they arrive instead of being reassembled first
(:class:`~synclab.wire.frames.Reassembler`); ``on_message`` sees only the others.

``engine`` (``transport.engine``): ``grpc`` (the default) carries each data-plane
stream as a gRPC bidirectional stream; ``tcp`` as one plain TCP connection
(:mod:`synclab.wire.tcp`: a hello, then length-prefixed ``synclab.v1`` frames),
listened for on a second port (:meth:`NodeTransport.serve` ``tcp_port``) and
found through the node's ``tcp-data-port=`` capability (:func:`stream_address`).
Either way a stream is bidirectional, the acceptor answers on its reverse
(:meth:`reverse_link`), and errors reach the same handlers; the gRPC server
still serves everything else (PS pulls).
"""

from __future__ import annotations

import logging
import select
import socket
import threading
import time
from typing import Callable, Iterable

import grpc

from synclab.transport.link import KIND_NAMES, ByteMeter, Link, NullMeter
from synclab.transport.scheduler import SchedulerGroup
from synclab.transport.shaper import LinkShaper
from synclab.transport.spans import SpanLog
from synclab.wire import pb, tcp
from synclab.wire.channels import (
    KEEPALIVE_TIME_MS,
    KEEPALIVE_TIMEOUT_MS,
    bind,
    caller_node,
    make_server,
    open_channel,
    open_stream,
    peer_stream_handlers,
    ps_stream_handlers,
)
from synclab.wire.frames import (
    CONSUMED,
    HEADER_SLACK_BYTES,
    DuplicateStream,
    FrameError,
    MessageLimits,
    NotPermitted,
    Reassembler,
    Received,
    Refusal,
    SinkSource,
    refusal_status,
)

log = logging.getLogger(__name__)

MessageHandler = Callable[[Received], None]
ErrorHandler = Callable[[str, BaseException], None]
PullHandler = Callable[[pb.PullRequest, grpc.ServicerContext], Iterable[pb.Frame]]


class PeerUnreachable(ConnectionError):
    pass


ENGINES = ("grpc", "tcp")
TCP_CAPABILITY = "tcp-data-port="  # NodeInfo.capabilities entry: the port of the node's tcp-engine listener


def stream_address(node: pb.NodeInfo, engine: str) -> str:
    """Where to open a data-plane stream to ``node``: its gRPC address, or for the tcp engine the same host at
    the port its ``tcp-data-port=`` capability names."""
    if engine == "grpc":
        return node.address
    for cap in node.capabilities:
        if cap.startswith(TCP_CAPABILITY):
            host = node.address.rsplit(":", 1)[0]
            return f"{host}:{cap[len(TCP_CAPABILITY):]}"
    raise PeerUnreachable(f"{node.name} advertises no tcp data-plane port (capabilities {list(node.capabilities)}); "
                          f"every node of a transport.engine=tcp job must run a SyncLab with the tcp engine")


def _tune(sock: socket.socket, keepalive_scale: float) -> None:
    """The gRPC engine's connection settings on a tcp-engine socket: no Nagle delay, keepalive probes, and the
    same TCP_USER_TIMEOUT (synclab.wire.channels: KEEPALIVE_*), stretched by run.dilation."""
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    if hasattr(socket, "TCP_KEEPIDLE"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE, max(1, int(KEEPALIVE_TIME_MS * keepalive_scale / 1000)))
    if hasattr(socket, "TCP_USER_TIMEOUT"):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT, int(KEEPALIVE_TIMEOUT_MS * keepalive_scale))


class _TcpStream:
    """One tcp-engine connection: a writer thread drains a link into it, a reader thread feeds ``_read``."""

    def __init__(self, owner: "NodeTransport", sock: socket.socket, peer: str, link: Link, accepted: bool):
        self.owner, self.sock, self.peer, self.link, self.accepted = owner, sock, peer, link, accepted
        self.writer_error: BaseException | None = None
        self._lock = threading.Lock()
        self._ends = 0
        self.reader = threading.Thread(target=self._reader, name=f"rx-{owner.name}-{peer}", daemon=True)
        self.writer = threading.Thread(target=self._writer, name=f"tx-{owner.name}-{peer}", daemon=True)

    def start(self) -> None:
        self.reader.start()
        self.writer.start()

    def _reader(self) -> None:
        frames = tcp.FrameReader(self.sock, self.owner.chunk_bytes + HEADER_SLACK_BYTES, lambda: self.writer_error)
        try:
            self.owner._read(self.peer, frames, self.link if self.accepted else None)
            if self.accepted and self.link.abort_error is not None:
                self._drain()
        finally:
            if not self.accepted:  # the opener's stream is over: stop sending too (gRPC ends the whole call)
                self.link.close(tcp.StreamBroken(f"the stream to {self.peer} ended"))
            self._end()

    def _drain(self) -> None:
        """After refusing a frame: discard what the opener still sends until it half-closes (it does once it
        reads the abort record), so closing does not reset the connection before the abort record is read."""
        deadline = time.monotonic() + self.owner.connect_timeout_s
        scratch = bytearray(1 << 16)
        while (left := deadline - time.monotonic()) > 0:
            try:
                if not select.select([self.sock], [], [], left)[0]:
                    return
                if self.sock.recv_into(scratch) == 0:
                    return
            except (OSError, ValueError):
                return

    def _writer(self) -> None:
        sock, link = self.sock, self.link
        try:
            for frame in link.frames():
                tcp.send_frame(sock, frame)
            if link.abort_error is not None:
                tcp.send_abort(sock, f"{refusal_status(link.abort_error)}: {self.owner.name} refused a frame from "
                                     f"{self.peer}: {link.abort_error}")
                sock.shutdown(socket.SHUT_WR)
            else:
                tcp.send_end(sock)
        except OSError as e:
            self.writer_error = e
            link.close(tcp.StreamBroken(f"sending to {self.peer} failed: {e}"))
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wake the reader: it reports the failure
            except OSError:
                pass
        finally:
            self._end()

    def _end(self) -> None:
        with self._lock:
            self._ends += 1
            done = self._ends == 2
        if done:
            self.sock.close()

    def kill(self) -> None:
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class NodeTransport:
    def __init__(self, name: str, token: str, *, on_message: MessageHandler, on_error: ErrorHandler | None = None,
                 policy: str = "fifo", chunk_bytes: int = 1 << 20, queue_bytes: int = 64 << 20,
                 shaper: LinkShaper | None = None, meter: ByteMeter | None = None, connect_timeout_s: float = 30.0,
                 max_streams: int = 64, spans: SpanLog | None = None, keepalive_scale: float = 1.0,
                 limits: MessageLimits | None = None, sinks: SinkSource | None = None, engine: str = "grpc"):
        if engine not in ENGINES:
            raise ValueError(f"unknown data-plane engine {engine!r}; known: {', '.join(ENGINES)}")
        self.engine = engine
        self.name, self._token = name, token
        self.sinks = sinks
        self.limits = limits if limits is not None else MessageLimits()  # shared by every stream's Reassembler
        self.keepalive_scale = keepalive_scale  # run.dilation: gRPC keepalive stretched by it (wire.channels)
        self.spans = spans
        self.on_message, self.on_error = on_message, on_error or self._log_error
        self.policy, self.chunk_bytes, self.queue_bytes = policy, chunk_bytes, queue_bytes
        self.shaper = shaper or LinkShaper()
        self.meter = meter or NullMeter()
        self.connect_timeout_s = connect_timeout_s
        self._max_streams = max_streams
        self._links: dict[str, Link] = {}
        self._accepted: dict[str, Link] = {}  # the reverse links of streams peers opened, by peer
        self._peers: frozenset[str] | None = None  # who may open a stream (None: anyone with the token)
        self._send_group = SchedulerGroup()  # every link's queue: the most urgent head goes first (P3 §4.2)
        self._channels: list[grpc.Channel] = []
        self._client_readers: list[threading.Thread] = []
        self._cv = threading.Condition()
        self._server: grpc.Server | None = None
        self._closing = False
        self._listener: socket.socket | None = None
        self._tcp_services: tuple[str, ...] = ()
        self._tcp_streams: list[_TcpStream] = []
        self.tcp_port: int | None = None

    # -- server side -----------------------------------------------------------------
    def serve(self, host: str = "0.0.0.0", port: int = 0, *, ps: bool = False, peer: bool = False,
              pull_handler: PullHandler | None = None, tcp_port: int = 0) -> int:
        """Start the gRPC server on ``port`` (the bound port is returned); with the tcp engine also listen for
        data-plane streams on ``tcp_port`` (0: any; the bound one is :attr:`tcp_port`)."""
        if self.engine == "tcp":
            self._listen_tcp(host, tcp_port, tuple(s for s, on in (("ps", ps), ("peer", peer)) if on))
        server = make_server(self._token, self._max_streams, self.chunk_bytes,
                             keepalive_scale=self.keepalive_scale)
        if ps:
            server.add_generic_rpc_handlers((ps_stream_handlers(self._accept_stream, self._pull(pull_handler)),))
        if peer:
            server.add_generic_rpc_handlers((peer_stream_handlers(self._accept_stream),))
        bound = bind(server, f"{host}:{port}")
        if bound == 0:
            raise OSError(f"{self.name}: cannot bind the data-plane server to {host}:{port}")
        server.start()
        self._server = server
        return bound

    def _listen_tcp(self, host: str, port: int, services: tuple[str, ...]) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # roles.bootstrap.reserve_port holds it
            sock.bind((host if host != "0.0.0.0" else "", port))
            sock.listen(self._max_streams)
        except OSError as e:
            sock.close()
            raise OSError(f"{self.name}: cannot bind the tcp data-plane listener to {host}:{port}: {e}") from None
        self._listener, self._tcp_services = sock, services
        self.tcp_port = sock.getsockname()[1]
        threading.Thread(target=self._accept_loop, name=f"tcp-accept-{self.name}", daemon=True).start()
        log.info("%s: tcp data-plane engine listening on :%d (%s)", self.name, self.tcp_port, ", ".join(services))

    def _accept_loop(self) -> None:
        listener = self._listener
        while True:
            try:
                conn, addr = listener.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._accept_tcp, args=(conn, addr), name=f"tcp-hello-{self.name}",
                             daemon=True).start()

    def _accept_tcp(self, conn: socket.socket, addr) -> None:
        """Check an opener's hello, answer it, then serve the connection like :meth:`_accept_stream`."""
        try:
            conn.settimeout(self.connect_timeout_s)
            try:
                peer, _service = tcp.read_hello(conn, self._token, self._tcp_services)
            except tcp.HelloRefused as e:
                log.warning("%s: refusing a tcp data-plane connection from %s: %s", self.name, addr, e)
                tcp.refuse_reply(conn, str(e))
                conn.close()
                return
            refused = self._refuse_peer(peer)
            if refused is not None:
                log.warning("%s: refusing a tcp data-plane connection from %s: %s", self.name, addr, refused)
                tcp.refuse_reply(conn, f"{refused.status}: {refused}")
                conn.close()
                return
            live = sum(1 for st in self._tcp_streams if st.accepted and st.reader.is_alive())
            if live >= self._max_streams or self._closing:
                tcp.refuse_reply(conn, f"{self.name} serves at most {self._max_streams} streams"
                                 if not self._closing else f"{self.name} is closing")
                conn.close()
                return
            tcp.accept_reply(conn)
            conn.settimeout(None)
            _tune(conn, self.keepalive_scale)
        except OSError as e:
            log.warning("%s: a tcp data-plane connection from %s failed during its hello: %s", self.name, addr, e)
            conn.close()
            return
        link = self._new_link(peer)
        stream = _TcpStream(self, conn, peer, link, accepted=True)
        self._tcp_streams.append(stream)
        with self._cv:
            self._links[peer] = self._accepted[peer] = link
            self._cv.notify_all()
        stream.start()

    def set_peers(self, names) -> None:
        """Accept streams only from these nodes (the job's members that send to this one), from now on."""
        self._peers = frozenset(names)

    def _refuse_peer(self, peer: str) -> Refusal | None:
        """Why a stream from ``peer`` is refused, or None: not one of this node's peers, or a second stream
        under a name whose first is still open (its replies would go astray)."""
        if self._peers is not None and peer not in self._peers:
            return NotPermitted(f"{peer!r} is not a node of this job that may send to {self.name}")
        old = self._accepted.get(peer)
        if old is not None and not old.closed:
            return DuplicateStream(f"{peer!r} already has an open stream to {self.name}")
        return None

    def set_limits(self, limits: MessageLimits) -> None:
        """Apply new limits to this node's streams, open ones included."""
        self.limits.update(limits)

    def _new_link(self, peer: str) -> Link:
        return Link(self.name, peer, policy=self.policy, chunk_bytes=self.chunk_bytes, capacity_bytes=self.queue_bytes,
                    shaper=self.shaper, meter=self.meter, spans=self.spans, group=self._send_group)

    def _accept_stream(self, request_iterator, context) -> Iterable[pb.Frame]:
        peer = caller_node(context) or context.peer()
        refused = self._refuse_peer(peer)
        if refused is not None:
            log.warning("%s: refusing a stream from %s: %s", self.name, peer, refused)
            context.abort(getattr(grpc.StatusCode, refused.status), str(refused))
        link = self._new_link(peer)
        with self._cv:
            self._links[peer] = self._accepted[peer] = link
            self._cv.notify_all()
        threading.Thread(target=self._read, args=(peer, request_iterator, link), name=f"rx-{self.name}-{peer}",
                         daemon=True).start()
        yield from link.frames()
        if link.abort_error is not None:
            context.abort(getattr(grpc.StatusCode, refusal_status(link.abort_error)),
                          f"{self.name} refused a frame from {peer}: {link.abort_error}")

    def _read(self, peer: str, frames: Iterable[pb.Frame], reverse: Link | None) -> None:
        """Reassemble and dispatch inbound frames from one stream until it ends."""
        # A message is from whoever opened the stream (authenticated by its hello or call metadata), whatever
        # its frames' sender field says: one node cannot speak in another's name on its own stream.
        reasm = Reassembler(max_chunk_bytes=self.chunk_bytes, limits=self.limits, peer=peer, sinks=self.sinks,
                            sender=peer if reverse is not None else None)
        meter, spans = self.meter, self.spans
        rx_first: dict[tuple, float] = {}
        try:
            for frame in frames:
                h = frame.header
                meter.add_received(peer, KIND_NAMES.get(h.kind, "unknown"), len(frame.payload))
                if spans is not None and h.offset == 0:
                    rx_first[(h.key, h.slice, h.iteration, h.tag)] = spans.now()
                msg = reasm.add(frame)
                if msg is not None:
                    if spans is not None:
                        now = spans.now()
                        spans.add("rx", h.iteration, rx_first.pop((h.key, h.slice, h.iteration, h.tag), now), now,
                                  peer=peer, key=h.key, slice_=h.slice, nbytes=h.total_bytes)
                    if msg is not CONSUMED:
                        self.on_message(msg)
        except (FrameError, ValueError) as e:
            if reverse is not None:  # server side: refuse the stream
                log.warning("%s: refusing stream from %s: %s", self.name, peer, e)
                reverse.close(e, abort=True)
            else:
                self.on_error(peer, e)
            return
        except (grpc.RpcError, tcp.StreamBroken, tcp.StreamAborted) as e:
            if reverse is not None:
                reverse.close(e)
            if not self._closing:
                self.on_error(peer, e)
            return
        except Exception as e:  # a bug in a handler: make it loud, never silent
            log.exception("%s: handler failed on a message from %s", self.name, peer)
            if reverse is not None:
                reverse.close(e, abort=True)
            self.on_error(peer, e)
            return
        if reverse is not None:
            reverse.close()

    # -- client side -----------------------------------------------------------------
    def connect(self, peer: str, address: str, service: str) -> Link:
        """Open the long-lived stream to ``peer``'s ``service`` ('ps' or 'peer'); ``address``: the peer's gRPC
        address, or with the tcp engine its tcp listener's (:func:`stream_address`)."""
        if self.engine == "tcp":
            return self._connect_tcp(peer, address, service)
        channel = open_channel(address, self._token, self.name, self.chunk_bytes,
                               keepalive_scale=self.keepalive_scale)
        try:
            grpc.channel_ready_future(channel).result(timeout=self.connect_timeout_s)
        except grpc.FutureTimeoutError:
            channel.close()
            raise PeerUnreachable(f"{self.name}: {peer} at {address} is unreachable "
                                  f"(no connection within {self.connect_timeout_s:g} s)") from None
        self._channels.append(channel)
        link = self._new_link(peer)
        responses = open_stream(channel, service)(link.frames())
        reader = threading.Thread(target=self._read, args=(peer, responses, None), name=f"rx-{self.name}-{peer}",
                                  daemon=True)
        reader.start()
        self._client_readers.append(reader)
        with self._cv:
            self._links[peer] = link
            self._cv.notify_all()
        return link

    def _connect_tcp(self, peer: str, address: str, service: str) -> Link:
        host, _, port = address.rpartition(":")
        deadline, pause = time.monotonic() + self.connect_timeout_s, 0.02
        while True:  # like gRPC's channel_ready_future: a peer that registered may not listen yet; retry until then
            left = deadline - time.monotonic()
            try:
                sock = socket.create_connection((host.strip("[]"), int(port)), timeout=max(0.1, left))
                break
            except (OSError, ValueError) as e:
                if not isinstance(e, ConnectionRefusedError) or left <= pause:
                    raise PeerUnreachable(f"{self.name}: {peer} at {address} is unreachable over tcp "
                                          f"(within {self.connect_timeout_s:g} s: {e})") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.5)
        try:
            tcp.hello(sock, self._token, self.name, service)
            tcp.read_reply(sock)
        except tcp.HelloRefused as e:
            sock.close()
            raise tcp.HelloRefused(f"{self.name}: {peer} at {address} refused the tcp data-plane stream: {e}") from None
        except OSError as e:
            sock.close()
            raise PeerUnreachable(f"{self.name}: {peer} at {address} did not complete the tcp hello: {e}") from None
        sock.settimeout(None)
        _tune(sock, self.keepalive_scale)
        link = self._new_link(peer)
        stream = _TcpStream(self, sock, peer, link, accepted=False)
        self._tcp_streams.append(stream)
        self._client_readers.append(stream.reader)
        stream.start()
        with self._cv:
            self._links[peer] = link
            self._cv.notify_all()
        return link

    def link(self, peer: str) -> Link:
        try:
            return self._links[peer]
        except KeyError:
            raise KeyError(f"{self.name} has no link to {peer}") from None

    def reverse_link(self, peer: str, timeout: float | None = None) -> Link:
        """The link back to ``peer`` over the stream it opened; waits for it to connect."""
        with self._cv:
            if not self._cv.wait_for(lambda: peer in self._links, timeout=timeout):
                raise PeerUnreachable(f"{self.name}: {peer} did not open its stream within {timeout} s")
            return self._links[peer]

    def links(self) -> dict[str, Link]:
        return dict(self._links)

    def close(self, grace_s: float = 2.0) -> None:
        """Drain and half-close every stream we opened, let peers finish theirs, then stop."""
        self._closing = True
        for link in list(self._links.values()):
            link.close()
        for stream in list(self._tcp_streams):  # also a link _links lost to a second stream with the same peer
            stream.link.close()
        for reader in self._client_readers:  # the peer ends its side once ours is half-closed
            reader.join(timeout=grace_s)
        if self._listener is not None:
            self._listener.close()
            deadline = time.monotonic() + grace_s
            for stream in list(self._tcp_streams):  # the server's grace, then cut (as grpc's stop does)
                stream.reader.join(timeout=max(0.0, deadline - time.monotonic()))
                stream.writer.join(timeout=max(0.0, deadline - time.monotonic()))
                stream.kill()
        if self._server is not None:
            self._server.stop(grace_s).wait(grace_s + 1)
        for ch in self._channels:
            ch.close()

    @staticmethod
    def _pull(handler: PullHandler | None) -> PullHandler:
        def pull(request, context):
            if handler is None:
                context.abort(grpc.StatusCode.UNIMPLEMENTED, "this node holds no parameters")
            return handler(request, context)
        return pull

    def _log_error(self, peer: str, err: BaseException) -> None:
        log.error("%s: stream with %s failed: %s", self.name, peer, err)
