"""The data plane's frame codec: ``synclab.v1.Frame`` in protobuf's own encoding, with one copy of the payload.

A :class:`WireFrame` is what the transport sends and receives instead of a
generated ``pb.Frame``. The bytes on the wire are exactly what
``pb.Frame.SerializeToString()`` writes (field 1, the header, then field 2, the
payload, each length-delimited; an empty payload omitted as proto3 omits it), so
the wire contract ``synclab.v1`` is unchanged and any protobuf implementation
reads them. What changes is the copying:

* sending, :func:`frame_for` builds the encoded frame straight from the tensor's
  memory in one ``bytes.join`` (generated code would copy the chunk into a
  ``bytes`` payload, then again into the serialized message), and gRPC is handed
  those bytes as they are (:func:`encode_frame`);
* receiving, :func:`decode_frame` parses the two fields by hand and keeps the
  payload as a ``memoryview`` into the buffer gRPC delivered (generated code would
  copy it into a new ``bytes``); only the small header goes through protobuf.

Anything that is not the plain two-field layout (unknown fields, repeated
fields, another order) is handed to protobuf's parser, so a valid Frame from
any writer is read. A truncated or malformed frame raises
:class:`~synclab.wire.frames.FrameError`.
"""

from __future__ import annotations

from google.protobuf.message import DecodeError

from synclab.wire import pb

_HEADER_TAG = b"\x0a"  # field 1, wire type 2 (length-delimited)
_PAYLOAD_TAG = b"\x12"  # field 2, wire type 2
EMPTY = memoryview(b"")


class MalformedFrame(ValueError):
    """Bytes that are not a ``synclab.v1.Frame``."""


class WireFrame:
    """One frame: a ``pb.FrameHeader`` and its payload; ``encoded`` is set on frames built to be sent."""

    __slots__ = ("header", "payload", "encoded")

    def __init__(self, header: pb.FrameHeader, payload=EMPTY, encoded: bytes | None = None):
        self.header, self.payload, self.encoded = header, payload, encoded


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _read_varint(data, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise MalformedFrame("truncated or overlong length in a frame")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def frame_for(header: pb.FrameHeader, payload=EMPTY) -> WireFrame:
    """A frame to send: encoded now (the payload's one copy), ``payload`` a view into the encoding."""
    h = header.SerializeToString()
    head = _HEADER_TAG + _varint(len(h)) + h
    if not len(payload):
        return WireFrame(header, EMPTY, head)
    prefix = head + _PAYLOAD_TAG + _varint(len(payload))
    encoded = b"".join((prefix, payload))
    return WireFrame(header, memoryview(encoded)[len(prefix):], encoded)


def encode_frame(frame) -> bytes:
    """gRPC's serializer for Frame: the bytes :func:`frame_for` made, else protobuf's (a generated ``pb.Frame``)."""
    encoded = getattr(frame, "encoded", None)
    if encoded is not None:
        return encoded
    if isinstance(frame, WireFrame):
        return frame_for(frame.header, frame.payload).encoded
    return frame.SerializeToString()


def decode_frame(data: bytes) -> WireFrame:
    """gRPC's deserializer for Frame: the payload stays a view into ``data``."""
    view = memoryview(data)
    header = payload = None
    pos, n = 0, len(data)
    while pos < n:
        tag = data[pos]
        if tag not in (0x0A, 0x12) or (tag == 0x0A and header is not None) or (tag == 0x12 and payload is not None):
            return _decode_slowly(data)
        length, start = _read_varint(data, pos + 1)
        end = start + length
        if end > n:
            raise MalformedFrame(f"a frame field of {length} bytes overruns the {n}-byte frame")
        if tag == 0x0A:
            try:
                header = pb.FrameHeader.FromString(view[start:end])
            except DecodeError as e:
                raise MalformedFrame(f"unreadable frame header: {e}") from None
        else:
            payload = view[start:end]
        pos = end
    return WireFrame(header if header is not None else pb.FrameHeader(), payload if payload is not None else EMPTY)


def _decode_slowly(data: bytes) -> WireFrame:
    try:
        f = pb.Frame.FromString(data)
    except DecodeError as e:
        raise MalformedFrame(f"unreadable frame: {e}") from None
    return WireFrame(f.header, memoryview(f.payload))
