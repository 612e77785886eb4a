"""The tcp engine's wire (synclab.wire.tcp) over a socketpair: hello, records, limits, truncation."""

import socket
import struct
import threading

import pytest
import torch

from synclab.wire import pb, tcp
from synclab.wire.codec import frame_for
from synclab.wire.frames import FrameError, Message, MessageId, Reassembler, chunk_frames

TOKEN = "t0ken"


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.settimeout(5)
    b.settimeout(5)
    yield a, b
    a.close()
    b.close()


def test_frames_round_trip_bit_identical(pair):
    a, b = pair
    t = torch.randn(10_000)
    msg = Message(MessageId(pb.COLLECTIVE, "grad", 2, 7, 1), t, priority=3)
    frames = list(chunk_frames(msg, "w0", chunk_bytes=4096))
    sender = threading.Thread(target=lambda: ([tcp.send_frame(a, f) for f in frames], tcp.send_end(a)))
    sender.start()
    reasm, got = Reassembler(max_chunk_bytes=4096), []
    for f in tcp.FrameReader(b, 4096 + 1024):
        r = reasm.add(f)  # the payload is a view into the reader's buffer: used before the next read
        if r is not None:
            got.append(r)
    sender.join(5)
    assert len(got) == 1 and got[0].mid == msg.mid and got[0].sender == "w0" and got[0].priority == 3
    assert torch.equal(got[0].tensor, t)


def test_record_is_length_prefixed_serialized_frame(pair):
    """The bytes after the 5-byte record header are exactly protobuf's encoding of the Frame (synclab.v1)."""
    a, b = pair
    pbf = pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=4, dtype=pb.UINT8, shape=[4]),
                   payload=b"\x01\x02\x03\x04")
    n = tcp.send_frame(a, frame_for(pbf.header, pbf.payload))
    raw = b.recv(n, socket.MSG_WAITALL)
    kind, length = struct.unpack(">BI", raw[:5])
    assert kind == tcp.FRAME_RECORD and length == n - 5
    assert pb.Frame.FromString(raw[5:]) == pbf


def test_oversized_frame_is_refused_before_it_is_read(pair):
    a, b = pair
    a.sendall(struct.pack(">BI", tcp.FRAME_RECORD, 1 << 30))
    with pytest.raises(FrameError, match="exceeds this node's 65536-byte frame limit"):
        list(tcp.FrameReader(b, 1 << 16))


def test_malformed_frame_is_refused(pair):
    a, b = pair
    body = b"\x0a\x7f\x00"  # a header field announcing 127 bytes in a 3-byte frame
    a.sendall(struct.pack(">BI", tcp.FRAME_RECORD, len(body)) + body)
    with pytest.raises(FrameError, match="malformed frame"):
        list(tcp.FrameReader(b, 1 << 16))


def test_unknown_record_kind_is_refused(pair):
    a, b = pair
    a.sendall(struct.pack(">BI", 9, 0))
    with pytest.raises(FrameError, match="unknown record kind 9"):
        list(tcp.FrameReader(b, 1 << 16))


def test_truncated_frame_is_a_broken_stream_and_a_clean_end_is_not(pair):
    a, b = pair
    f = frame_for(pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=8, dtype=pb.UINT8, shape=[8]), bytes(8))
    tcp.send_frame(a, f)
    a.sendall(struct.pack(">BI", tcp.FRAME_RECORD, 100) + b"x" * 10)
    a.shutdown(socket.SHUT_WR)
    it = iter(tcp.FrameReader(b, 1 << 16))
    assert next(it).header.key == "k"
    with pytest.raises(tcp.StreamBroken, match="truncated"):
        next(it)
    c, d = socket.socketpair()
    tcp.send_frame(c, f)
    tcp.send_end(c)
    assert [x.header.key for x in tcp.FrameReader(d, 1 << 16)] == ["k"]  # an end record, then EOF: the end
    c.close()
    d.close()


def test_eof_without_an_end_record_is_a_broken_stream(pair):
    """A crashed peer's kernel closes its sockets at a record boundary too: that is not a clean end."""
    a, b = pair
    f = frame_for(pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=8, dtype=pb.UINT8, shape=[8]), bytes(8))
    tcp.send_frame(a, f)
    a.shutdown(socket.SHUT_WR)
    it = iter(tcp.FrameReader(b, 1 << 16))
    assert next(it).header.key == "k"
    with pytest.raises(tcp.StreamBroken, match="without ending the stream"):
        next(it)


def test_abort_record_reaches_the_reader_with_its_reason(pair):
    a, b = pair
    tcp.send_abort(a, "b refused a frame from a: bad shape")
    with pytest.raises(tcp.StreamAborted, match="bad shape"):
        list(tcp.FrameReader(b, 1 << 16))


def test_hello_accepted(pair):
    a, b = pair
    tcp.hello(a, TOKEN, "w0", "peer")
    assert tcp.read_hello(b, TOKEN, ("peer",)) == ("w0", "peer")
    tcp.accept_reply(b)
    tcp.read_reply(a)  # no error


@pytest.mark.parametrize("contract,token,service,match", [
    ("synclab.v2", TOKEN, "peer", "wire contract 'synclab.v2'"),
    ("synclab.v1", "wrong", "peer", "wrong job token"),
    ("synclab.v1", TOKEN, "ps", "service 'ps' is not served"),
])
def test_hello_refused_on_both_ends(pair, contract, token, service, match):
    a, b = pair
    tcp.hello(a, token, "w0", service, contract=contract)
    with pytest.raises(tcp.HelloRefused, match=match) as e:
        tcp.read_hello(b, TOKEN, ("peer",))
    tcp.refuse_reply(b, str(e.value))
    with pytest.raises(tcp.HelloRefused, match=match):
        tcp.read_reply(a)


def test_not_a_synclab_peer(pair):
    a, b = pair
    a.sendall(b"GET / HTTP/1.1\r\n\r\n")
    with pytest.raises(tcp.HelloRefused, match="magic"):
        tcp.read_hello(b, TOKEN, ("peer",))
