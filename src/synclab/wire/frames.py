"""Tensor framing: a message = header + raw little-endian bytes, cut into chunks.

A tensor of ``total_bytes`` is sent as frames whose payloads cover
``[offset, offset + len(payload))``; the first frame (offset 0) also carries
dtype and shape. :class:`Reassembler` validates every chunk against the first
one and refuses anything inconsistent or oversized with :class:`FrameError`,
which servers turn into ``INVALID_ARGUMENT``.

Memory against any peer is bounded by :class:`MessageLimits`: a header that
announces more than ``max_message_bytes`` is refused before a byte is
allocated, and the staging buffers of one stream's unfinished messages never
exceed ``max_peer_bytes``. Roles derive both from the plan
(``Strategy.max_payload_bytes``, :meth:`MessageLimits.for_payload`).
"""

from __future__ import annotations

import math
import sys
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Iterator, Protocol

import torch

from synclab.wire import pb
from synclab.wire.chunks import DEFAULT_CHUNK_BYTES, FAST_CHUNK_BYTES, auto_chunk_bytes  # noqa: F401 - re-exported
from synclab.wire.codec import WireFrame, frame_for

# Room for the header on top of a full chunk when sizing gRPC message limits.
HEADER_SLACK_BYTES = 64 << 10
# What a buffered message costs beyond its payload when counting a peer's bytes (so empty ones are not free).
MESSAGE_OVERHEAD_BYTES = 256
# Largest dimension a shape may name: far above any tensor, far below what overflows torch's int64 sizes.
MAX_DIM = 1 << 48


_TORCH_TO_PB = {
    torch.float32: pb.FLOAT32,
    torch.float16: pb.FLOAT16,
    torch.bfloat16: pb.BFLOAT16,
    torch.float64: pb.FLOAT64,
    torch.int64: pb.INT64,
    torch.int32: pb.INT32,
    torch.uint8: pb.UINT8,
}
_PB_TO_TORCH = {v: k for k, v in _TORCH_TO_PB.items()}

if sys.byteorder != "little":  # pragma: no cover - no big-endian CI machine
    raise ImportError("SyncLab frames carry little-endian tensor bytes; big-endian hosts are unsupported")


class FrameError(ValueError):
    """A frame that cannot be accepted (bad dtype, shape, offsets or size)."""


class Refusal(ValueError):
    """A request a node refuses, with the gRPC status its stream or call ends with (:attr:`status`, a
    ``grpc.StatusCode`` name) and the reason as the message. A plain ``ValueError`` is ``INVALID_ARGUMENT``."""

    status = "INVALID_ARGUMENT"


class NotReady(Refusal):
    """Asked before the node can answer (its shard or plan does not exist yet): try again later."""

    status = "UNAVAILABLE"


class NotPermitted(Refusal):
    """The caller may not ask this (not a member of the job, or not in that role)."""

    status = "PERMISSION_DENIED"


class DuplicateStream(Refusal):
    """A second stream under a node name that already has one open."""

    status = "ALREADY_EXISTS"


def refusal_status(err: BaseException | None) -> str:
    """The ``grpc.StatusCode`` name a refused stream or call ends with for ``err``."""
    return getattr(err, "status", "INVALID_ARGUMENT")


@dataclass(slots=True)
class MessageLimits:
    """How much one peer may make a node hold.

    ``max_message_bytes``: the largest payload a message may announce (the plan's
    largest legitimate message plus a margin). ``max_peer_bytes``: the most bytes
    one stream's unfinished messages may stage (the receiver's reassembly buffers)
    and, separately, the most bytes of complete messages from one sender that may
    wait for their reader (the worker's inbox). A node shares one instance among
    its streams, so :meth:`update` tightens live streams too.
    """

    max_message_bytes: int = 256 << 20
    max_peer_bytes: int = 576 << 20

    def __post_init__(self):
        if self.max_message_bytes < 0 or self.max_peer_bytes < self.max_message_bytes:
            raise ValueError(f"need 0 <= max_message_bytes <= max_peer_bytes, got {self.max_message_bytes} and "
                             f"{self.max_peer_bytes}")

    @classmethod
    def for_payload(cls, largest_payload_bytes: int, queue_bytes: int) -> MessageLimits:
        """Limits for a node whose largest legitimate message carries ``largest_payload_bytes``.

        Margin: an eighth of the payload, at least 64 KiB (labels, loss scalars, rounding of
        sizes the plan does not state exactly). A peer may legitimately have up to its send
        queue (``transport.queue_bytes``, or one larger message) begun but unfinished, and
        up to about one iteration of a ring all-reduce (twice the largest message) not yet
        expected; ``max_peer_bytes`` = 2 x max message + queue bytes covers both.
        """
        if largest_payload_bytes < 0 or queue_bytes < 0:
            raise ValueError(f"sizes must be >= 0, got {largest_payload_bytes} and {queue_bytes}")
        limit = largest_payload_bytes + max(largest_payload_bytes // 8, 64 << 10)
        return cls(limit, 2 * limit + queue_bytes)

    def update(self, other: MessageLimits) -> None:
        self.max_message_bytes, self.max_peer_bytes = other.max_message_bytes, other.max_peer_bytes


def dtype_to_pb(dtype: torch.dtype) -> int:
    try:
        return _TORCH_TO_PB[dtype]
    except KeyError:
        raise FrameError(f"dtype {dtype} cannot be sent; supported: {sorted(map(str, _TORCH_TO_PB))}") from None


def dtype_from_pb(code: int) -> torch.dtype:
    try:
        return _PB_TO_TORCH[code]
    except KeyError:
        raise FrameError(f"unknown dtype code {code} in frame header") from None


@dataclass(frozen=True, slots=True)
class MessageId:
    """What identifies one logical message on a stream (all chunks share it)."""

    kind: int
    key: str
    slice: int = 0
    iteration: int = 0
    tag: int = 0


@dataclass(slots=True)
class Message:
    """An outgoing message: a tensor (or no payload) plus routing header fields."""

    mid: MessageId
    tensor: torch.Tensor | None = None
    priority: int = 0

    @property
    def nbytes(self) -> int:
        return 0 if self.tensor is None else self.tensor.numel() * self.tensor.element_size()


def tensor_bytes(tensor: torch.Tensor) -> memoryview:
    """A zero-copy byte view of a contiguous CPU tensor."""
    t = tensor.detach()
    if t.device.type != "cpu":
        t = t.cpu()
    t = t.contiguous()
    return memoryview(t.view(torch.uint8).numpy()).cast("B") if t.numel() else memoryview(b"")


def chunk_frames(msg: Message, sender: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[WireFrame]:
    """Yield the frames of ``msg``, encoded as each is made (:mod:`synclab.wire.codec`): the tensor's bytes are
    read when its chunk is cut, so a sender may reuse the tensor once the message's future has resolved. At
    least one frame, even for an empty payload."""
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    mid = msg.mid
    if msg.tensor is None:
        yield frame_for(pb.FrameHeader(kind=mid.kind, key=mid.key, slice=mid.slice, iteration=mid.iteration,
                                       priority=msg.priority, tag=mid.tag, sender=sender))
        return
    data = tensor_bytes(msg.tensor)
    total = len(data)
    n = max(1, math.ceil(total / chunk_bytes))
    for i in range(n):
        lo = i * chunk_bytes
        hdr = pb.FrameHeader(kind=mid.kind, key=mid.key, slice=mid.slice, iteration=mid.iteration,
                             priority=msg.priority, tag=mid.tag, sender=sender, offset=lo, total_bytes=total)
        if i == 0:
            hdr.dtype = dtype_to_pb(msg.tensor.dtype)
            hdr.shape.extend(msg.tensor.shape)
        yield frame_for(hdr, data[lo:lo + chunk_bytes])  # the chunk's one copy, from the tensor's memory


@dataclass(slots=True)
class Received:
    """A complete incoming message."""

    mid: MessageId
    sender: str
    priority: int
    tensor: torch.Tensor | None


class ChunkSink(Protocol):
    """Where a message's chunks go as they arrive (``synclab.transport.inbox.TensorSink``, a PS shard's push).

    ``deliver``: False, the sink's future is the only news of the finished message (:data:`CONSUMED`); True, the
    finished message, its ``tensor`` None, is also returned to be handed on (a shard's serve queue)."""

    deliver: bool

    def check(self, dtype: torch.dtype, total_bytes: int, what: str) -> None: ...
    def write(self, offset: int, payload) -> None: ...


class SinkSource(Protocol):
    """Who names sinks (``synclab.transport.inbox.Inbox``): the sink waiting for a message, claimed, or None."""

    def claim_sink(self, sender: str, mid: MessageId) -> tuple[ChunkSink, Future] | None: ...


# What Reassembler.add returns for a message whose chunks all went into a sink that is not ``deliver``.
CONSUMED = Received(MessageId(0, ""), "", 0, None)


@dataclass(slots=True)
class _Streaming:
    sink: ChunkSink
    future: Future
    total: int
    filled: int = 0
    priority: int = 0


@dataclass(slots=True)
class _Partial:
    dtype: torch.dtype
    shape: tuple[int, ...]
    buf: bytearray
    filled: int = 0
    priority: int = 0
    chunks: list = field(default_factory=list)


class Reassembler:
    """Collect the chunks of messages from one sender; return each message when complete.

    Chunks of one message arrive in order on one stream, but chunks of different
    messages may interleave (a priority scheduler preempts at chunk boundaries),
    so partial messages are kept per :class:`MessageId`. Every size a header
    announces is checked against ``limits`` before its buffer is allocated.

    ``sinks`` (a :class:`SinkSource`: a worker's inbox, a PS shard): at a
    message's first chunk, a sink already waiting for it takes every chunk as
    it arrives, in order and checked as staged chunks are, and no buffer is
    staged; ``add`` then resolves the sink's future at the last chunk and
    returns :data:`CONSUMED`, or, for a ``deliver`` sink, the message with
    ``tensor`` None. A sink that refuses a chunk fails its future and the stream.
    """

    def __init__(self, max_chunk_bytes: int = DEFAULT_CHUNK_BYTES, limits: MessageLimits | None = None, *,
                 peer: str = "peer", sinks: SinkSource | None = None, sender: str | None = None):
        self.max_chunk_bytes = max_chunk_bytes
        self.limits = limits if limits is not None else MessageLimits()
        self.peer = peer
        self.sender = sender  # given: every message is attributed to it, not to the frames' sender field
        self.sinks = sinks
        self._partial: dict[MessageId, _Partial | _Streaming] = {}
        self._staged_bytes = 0  # buffers of unfinished messages, plus MESSAGE_OVERHEAD_BYTES each

    def add(self, frame: WireFrame | pb.Frame) -> Received | None:
        h = frame.header
        mid = MessageId(h.kind, h.key, h.slice, h.iteration, h.tag)
        payload = frame.payload
        peer = self.peer
        if h.kind == pb.FRAME_KIND_UNSPECIFIED:
            raise FrameError(f"frame kind from {peer} is unspecified")
        if len(payload) > self.max_chunk_bytes:
            raise FrameError(f"chunk of {len(payload)} bytes from {peer} exceeds the {self.max_chunk_bytes}-byte "
                             f"frame limit")
        limit = self.limits.max_message_bytes
        if h.total_bytes > limit:
            raise FrameError(f"{peer} announced a message {mid.key!r} of {h.total_bytes} bytes; this node accepts "
                             f"at most {limit} bytes (the plan's largest message plus margin)")
        if h.total_bytes == 0 and not payload and h.dtype == pb.DTYPE_UNSPECIFIED:
            if mid in self._partial:
                raise FrameError(f"{peer} sent an empty {mid.key!r} while that message's chunks were arriving")
            return Received(mid, self.sender or h.sender, h.priority, None)
        part = self._partial.get(mid)
        if part is None:
            if h.offset != 0:
                raise FrameError(f"first chunk of {mid.key!r} from {peer} starts at offset {h.offset}, expected 0")
            dtype = dtype_from_pb(h.dtype)
            shape = tuple(int(s) for s in h.shape)
            if any(not 0 <= s <= MAX_DIM for s in shape):
                raise FrameError(f"dimension out of range in shape {shape} of {mid.key!r} from {peer}")
            expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            if expected != h.total_bytes:
                raise FrameError(f"{mid.key!r} from {peer}: shape {shape} of {dtype} needs {expected} bytes, "
                                 f"header says {h.total_bytes}")
            if len(payload) > h.total_bytes:
                raise FrameError(f"{mid.key!r} from {peer}: a {len(payload)}-byte chunk overruns the declared "
                                 f"{h.total_bytes} bytes")
            claimed = self.sinks.claim_sink(self.sender or h.sender, mid) if self.sinks is not None else None
            if claimed is not None:
                stream = _Streaming(claimed[0], claimed[1], h.total_bytes, priority=h.priority)
                try:
                    stream.sink.check(dtype, h.total_bytes, f"{mid.key!r} from {peer}")
                except FrameError as e:
                    stream.future.set_exception(e)
                    raise
                self._partial[mid] = stream
                return self._stream(mid, stream, h, payload)
            if len(payload) == h.total_bytes:  # single-chunk fast path: no staging buffer
                tensor = torch.frombuffer(bytearray(payload), dtype=dtype).reshape(shape) if payload else torch.empty(shape, dtype=dtype)
                return Received(mid, self.sender or h.sender, h.priority, tensor)
            staged = self._staged_bytes + h.total_bytes + MESSAGE_OVERHEAD_BYTES
            if staged > self.limits.max_peer_bytes:
                raise FrameError(f"{peer} has {len(self._partial)} unfinished messages holding "
                                 f"{self._staged_bytes} bytes; starting {mid.key!r} of {h.total_bytes} bytes would "
                                 f"exceed the {self.limits.max_peer_bytes}-byte per-peer limit")
            part = _Partial(dtype, shape, bytearray(h.total_bytes), priority=h.priority)
            self._partial[mid] = part
            self._staged_bytes = staged
        elif type(part) is _Streaming:
            return self._stream(mid, part, h, payload)
        elif h.offset != part.filled:
            raise FrameError(f"{mid.key!r} from {peer}: chunk at offset {h.offset}, expected {part.filled}")
        end = part.filled + len(payload)
        if end > len(part.buf):
            raise FrameError(f"{mid.key!r} from {peer}: chunks overrun the declared {len(part.buf)} bytes")
        part.buf[part.filled:end] = payload
        part.filled = end
        if end < len(part.buf):
            return None
        del self._partial[mid]
        self._staged_bytes -= len(part.buf) + MESSAGE_OVERHEAD_BYTES
        tensor = torch.frombuffer(part.buf, dtype=part.dtype).reshape(part.shape)
        return Received(mid, self.sender or h.sender, part.priority, tensor)

    def _stream(self, mid: MessageId, part: _Streaming, h, payload) -> Received | None:
        """One chunk of a message that goes into a sink: checked, applied, and the sink's future resolved at
        the last byte."""
        try:
            if h.offset != part.filled:
                raise FrameError(f"{mid.key!r} from {self.peer}: chunk at offset {h.offset}, expected {part.filled}")
            end = part.filled + len(payload)
            if end > part.total:
                raise FrameError(f"{mid.key!r} from {self.peer}: chunks overrun the declared {part.total} bytes")
            if not part.future.cancelled():  # a reader that gave up owns its destination again: drop the bytes
                part.sink.write(part.filled, payload)
        except BaseException as e:
            del self._partial[mid]
            if not part.future.done():
                part.future.set_exception(e)
            raise
        part.filled = end
        if end < part.total:
            return None
        del self._partial[mid]
        done = Received(mid, self.sender or h.sender, part.priority, None)
        if not part.future.done():
            part.future.set_result(done)
        return done if part.sink.deliver else CONSUMED

    @property
    def pending(self) -> int:
        return len(self._partial)

    @property
    def staged_bytes(self) -> int:
        """Bytes held for unfinished messages (with per-message overhead)."""
        return self._staged_bytes
