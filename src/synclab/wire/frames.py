"""Tensor framing: a message = header + raw little-endian bytes, cut into chunks.

A tensor of ``total_bytes`` is sent as frames whose payloads cover
``[offset, offset + len(payload))``; the first frame (offset 0) also carries
dtype and shape. :class:`Reassembler` validates every chunk against the first
one and refuses anything inconsistent or oversized with :class:`FrameError`,
which servers turn into ``INVALID_ARGUMENT``.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Iterator

import torch

from synclab.wire import pb

DEFAULT_CHUNK_BYTES = 1 << 20
# Room for the header on top of a full chunk when sizing gRPC message limits.
HEADER_SLACK_BYTES = 64 << 10

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


def chunk_frames(msg: Message, sender: str, chunk_bytes: int = DEFAULT_CHUNK_BYTES) -> Iterator[pb.Frame]:
    """Yield the frames of ``msg``; at least one frame even for an empty payload."""
    if chunk_bytes <= 0:
        raise ValueError(f"chunk_bytes must be positive, got {chunk_bytes}")
    mid = msg.mid
    if msg.tensor is None:
        yield pb.Frame(header=pb.FrameHeader(kind=mid.kind, key=mid.key, slice=mid.slice, iteration=mid.iteration,
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
        yield pb.Frame(header=hdr, payload=bytes(data[lo:lo + chunk_bytes]))


@dataclass(slots=True)
class Received:
    """A complete incoming message."""

    mid: MessageId
    sender: str
    priority: int
    tensor: torch.Tensor | None


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
    so partial messages are kept per :class:`MessageId`.
    """

    def __init__(self, max_chunk_bytes: int = DEFAULT_CHUNK_BYTES, max_message_bytes: int = 8 << 30):
        self.max_chunk_bytes = max_chunk_bytes
        self.max_message_bytes = max_message_bytes
        self._partial: dict[MessageId, _Partial] = {}

    def add(self, frame: pb.Frame) -> Received | None:
        h = frame.header
        mid = MessageId(h.kind, h.key, h.slice, h.iteration, h.tag)
        payload = frame.payload
        if h.kind == pb.FRAME_KIND_UNSPECIFIED:
            raise FrameError("frame kind is unspecified")
        if len(payload) > self.max_chunk_bytes:
            raise FrameError(f"chunk of {len(payload)} bytes exceeds the {self.max_chunk_bytes}-byte frame limit")
        if h.total_bytes > self.max_message_bytes:
            raise FrameError(f"message of {h.total_bytes} bytes exceeds the {self.max_message_bytes}-byte limit")
        if h.total_bytes == 0 and not payload and h.dtype == pb.DTYPE_UNSPECIFIED:
            return Received(mid, h.sender, h.priority, None)
        part = self._partial.get(mid)
        if part is None:
            if h.offset != 0:
                raise FrameError(f"first chunk of {mid.key!r} starts at offset {h.offset}, expected 0")
            dtype = dtype_from_pb(h.dtype)
            shape = tuple(int(s) for s in h.shape)
            if any(s < 0 for s in shape):
                raise FrameError(f"negative dimension in shape {shape} of {mid.key!r}")
            expected = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
            if expected != h.total_bytes:
                raise FrameError(f"{mid.key!r}: shape {shape} of {dtype} needs {expected} bytes, header says {h.total_bytes}")
            if len(payload) == h.total_bytes:  # single-chunk fast path: no staging buffer
                tensor = torch.frombuffer(bytearray(payload), dtype=dtype).reshape(shape) if payload else torch.empty(shape, dtype=dtype)
                return Received(mid, h.sender, h.priority, tensor)
            part = _Partial(dtype, shape, bytearray(h.total_bytes), priority=h.priority)
            self._partial[mid] = part
        elif h.offset != part.filled:
            raise FrameError(f"{mid.key!r}: chunk at offset {h.offset}, expected {part.filled}")
        end = part.filled + len(payload)
        if end > len(part.buf):
            raise FrameError(f"{mid.key!r}: chunks overrun the declared {len(part.buf)} bytes")
        part.buf[part.filled:end] = payload
        part.filled = end
        if end < len(part.buf):
            return None
        del self._partial[mid]
        tensor = torch.frombuffer(part.buf, dtype=part.dtype).reshape(part.shape)
        return Received(mid, h.sender, part.priority, tensor)

    @property
    def pending(self) -> int:
        return len(self._partial)
