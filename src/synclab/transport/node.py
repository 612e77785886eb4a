"""A node's transport: its gRPC data-plane server, its links to peers, inbound reassembly.

Every node (worker or PS shard) has one :class:`NodeTransport`. Outgoing
streams are opened with :meth:`connect`; a PS shard answers each worker on the
reverse direction of the stream that worker opened (:meth:`reverse_link`).
Complete inbound messages go to ``on_message``; a frame that cannot be accepted
(:class:`~synclab.wire.frames.FrameError`, or a ``ValueError`` raised by
``on_message``) aborts that stream with ``INVALID_ARGUMENT``.

``limits`` (:class:`~synclab.wire.frames.MessageLimits`) bound what any one
peer can make this node hold; a role sets them from the plan
(:meth:`NodeTransport.set_limits`) before peers send data. A peer that breaks
them loses its stream; the server and every other stream carry on.

``sinks`` (the worker's :class:`~synclab.transport.inbox.Inbox`): messages
whose destination was named in advance (``Inbox.expect_into``) are written into
it chunk by chunk as they arrive instead of being reassembled first
(:class:`~synclab.wire.frames.Reassembler`); ``on_message`` sees only the others.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable

import grpc

from synclab.transport.link import KIND_NAMES, ByteMeter, Link, NullMeter
from synclab.transport.shaper import LinkShaper
from synclab.transport.scheduler import SchedulerGroup
from synclab.transport.spans import SpanLog
from synclab.wire import pb
from synclab.wire.channels import (
    bind,
    caller_node,
    make_server,
    open_channel,
    open_stream,
    peer_stream_handlers,
    ps_stream_handlers,
)
from synclab.wire.frames import CONSUMED, FrameError, MessageLimits, Reassembler, Received, SinkSource

log = logging.getLogger(__name__)

MessageHandler = Callable[[Received], None]
ErrorHandler = Callable[[str, BaseException], None]
PullHandler = Callable[[pb.PullRequest, grpc.ServicerContext], Iterable[pb.Frame]]


class PeerUnreachable(ConnectionError):
    pass


class NodeTransport:
    def __init__(self, name: str, token: str, *, on_message: MessageHandler, on_error: ErrorHandler | None = None,
                 policy: str = "fifo", chunk_bytes: int = 1 << 20, queue_bytes: int = 64 << 20,
                 shaper: LinkShaper | None = None, meter: ByteMeter | None = None, connect_timeout_s: float = 30.0,
                 max_streams: int = 64, spans: SpanLog | None = None, keepalive_scale: float = 1.0,
                 limits: MessageLimits | None = None, sinks: SinkSource | None = None):
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
        self._send_group = SchedulerGroup()  # every link's queue: the most urgent head goes first (P3 §4.2)
        self._channels: list[grpc.Channel] = []
        self._client_readers: list[threading.Thread] = []
        self._cv = threading.Condition()
        self._server: grpc.Server | None = None
        self._closing = False

    # -- server side -----------------------------------------------------------------
    def serve(self, host: str = "0.0.0.0", port: int = 0, *, ps: bool = False, peer: bool = False,
              pull_handler: PullHandler | None = None) -> int:
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

    def set_limits(self, limits: MessageLimits) -> None:
        """Apply new limits to this node's streams, open ones included."""
        self.limits.update(limits)

    def _new_link(self, peer: str) -> Link:
        return Link(self.name, peer, policy=self.policy, chunk_bytes=self.chunk_bytes, capacity_bytes=self.queue_bytes,
                    shaper=self.shaper, meter=self.meter, spans=self.spans, group=self._send_group)

    def _accept_stream(self, request_iterator, context) -> Iterable[pb.Frame]:
        peer = caller_node(context) or context.peer()
        link = self._new_link(peer)
        with self._cv:
            self._links[peer] = link
            self._cv.notify_all()
        threading.Thread(target=self._read, args=(peer, request_iterator, link), name=f"rx-{self.name}-{peer}",
                         daemon=True).start()
        yield from link.frames()
        if link.abort_error is not None:
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, f"{self.name} refused a frame from {peer}: {link.abort_error}")

    def _read(self, peer: str, frames: Iterable[pb.Frame], reverse: Link | None) -> None:
        """Reassemble and dispatch inbound frames from one stream until it ends."""
        reasm = Reassembler(max_chunk_bytes=self.chunk_bytes, limits=self.limits, peer=peer, sinks=self.sinks)
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
        except grpc.RpcError as e:
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
        """Open the long-lived stream to ``peer``'s ``service`` ('ps' or 'peer')."""
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
        for reader in self._client_readers:  # the peer ends its side once ours is half-closed
            reader.join(timeout=grace_s)
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
