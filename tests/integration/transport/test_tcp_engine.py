"""The tcp data-plane engine (transport.engine: tcp) between NodeTransports over loopback."""

import socket
import struct
import threading

import pytest
import torch

from support.rings import ring_over_transports
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport
from synclab.wire import pb, tcp
from synclab.wire.frames import Message, MessageId

TOKEN = "t0ken"


def _ring(engine: str, world: int, data, pieces: int, streamed: bool, slow_rank0: bool):
    assert len(data) == world
    return ring_over_transports(data, pieces=pieces, streamed=streamed, slow_rank0=slow_rank0, engine=engine,
                                token=TOKEN)


@pytest.mark.parametrize("streamed", [True, False], ids=["into-place", "staged"])
@pytest.mark.parametrize("world,slow_rank0,pieces,numel", [
    (2, False, 1, 10_001), (3, True, 3, 10_001), (4, True, 1, 100_003), (4, False, 5, 100_003)])
def test_ring_allreduce_over_tcp_is_bit_identical_to_grpc(world, slow_rank0, pieces, numel, streamed):
    torch.manual_seed(world * 100 + pieces)
    data = [torch.randn(numel) for _ in range(world)]
    ours = _ring("tcp", world, data, pieces, streamed, slow_rank0)
    ref = _ring("grpc", world, data, pieces, streamed, slow_rank0)
    for r in range(world):
        assert ours[r] is not None and torch.allclose(ours[r], sum(data), atol=1e-4)
        assert torch.equal(ours[r], ref[r])


def test_reverse_link_and_close_semantics():
    """The acceptor answers on the opener's connection (as the PS does); closing drains both directions."""
    inbox_a, inbox_b = Inbox(), Inbox()
    a = NodeTransport("a", TOKEN, on_message=inbox_a.deliver, chunk_bytes=64 << 10, engine="tcp")
    b = NodeTransport("b", TOKEN, on_message=inbox_b.deliver, chunk_bytes=64 << 10, engine="tcp")
    b.serve("127.0.0.1", 0, ps=True)
    link = a.connect("b", f"127.0.0.1:{b.tcp_port}", "ps")
    t = torch.randn(50_000)
    mid = MessageId(pb.GRADIENT, "w", 0, 1)
    fut = inbox_b.expect("a", mid)
    link.send(Message(mid, t)).result(timeout=10)
    assert torch.equal(fut.result(timeout=10).tensor, t)
    back = b.reverse_link("a", timeout=5)
    rmid = MessageId(pb.PARAMS, "w", 0, 1)
    rfut = inbox_a.expect("b", rmid)
    back.send(Message(rmid, t * 2)).result(timeout=10)
    assert torch.equal(rfut.result(timeout=10).tensor, t * 2)
    a.close()
    b.close()
    assert all(not s.reader.is_alive() and not s.writer.is_alive() for s in a._tcp_streams + b._tcp_streams)


def test_wrong_token_is_refused_with_a_clear_error():
    b = NodeTransport("b", TOKEN, on_message=lambda m: None, engine="tcp")
    b.serve("127.0.0.1", 0, peer=True)
    a = NodeTransport("a", "wrong", on_message=lambda m: None, engine="tcp")
    with pytest.raises(tcp.HelloRefused, match="b at .* refused .*wrong job token"):
        a.connect("b", f"127.0.0.1:{b.tcp_port}", "peer")
    assert not b.links()
    b.close()


def test_refused_frame_reaches_the_openers_error_handler():
    """A frame the acceptor refuses (its shape does not match its size) ends the stream with the reason, as
    INVALID_ARGUMENT does on the gRPC engine; the acceptor carries on serving others."""
    errors = []
    got = threading.Event()
    b = NodeTransport("b", TOKEN, on_message=lambda m: None, engine="tcp")
    b.serve("127.0.0.1", 0, peer=True)
    sock = socket.create_connection(("127.0.0.1", b.tcp_port), timeout=5)
    tcp.hello(sock, TOKEN, "bad", "peer")
    tcp.read_reply(sock)
    frame = pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=8, dtype=pb.FLOAT32, shape=[3]),
                     payload=bytes(8)).SerializeToString()
    sock.sendall(struct.pack(">BI", tcp.FRAME_RECORD, len(frame)) + frame)
    with pytest.raises(tcp.StreamAborted, match="needs 12 bytes"):
        list(tcp.FrameReader(sock, 1 << 20))
    sock.close()
    # a NodeTransport opener hears it through on_error
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, engine="tcp",
                      on_error=lambda peer, e: (errors.append((peer, e)), got.set()))
    link = a.connect("b", f"127.0.0.1:{b.tcp_port}", "peer")
    link.send(Message(MessageId(pb.COLLECTIVE, "k"), torch.zeros(3, dtype=torch.int64)))
    ok = torch.zeros(2)
    assert not got.wait(0.5)  # a valid message is fine
    b.limits.max_message_bytes = 4  # now too big
    link.send(Message(MessageId(pb.COLLECTIVE, "k2"), ok))
    assert got.wait(10)
    assert errors[0][0] == "b" and isinstance(errors[0][1], tcp.StreamAborted)
    assert "accepts at most 4 bytes" in str(errors[0][1])
    a.close()
    b.close()


def test_connect_waits_for_a_peer_that_listens_late():
    """As gRPC's channel_ready_future does: a registered peer may open its listener a moment later."""
    from synclab.roles.bootstrap import reserve_port

    hold = reserve_port("127.0.0.1")
    port = hold.getsockname()[1]
    b = NodeTransport("b", TOKEN, on_message=lambda m: None, engine="tcp")

    def late():
        import time
        time.sleep(0.4)
        b.serve("127.0.0.1", 0, peer=True, tcp_port=port)
        hold.close()

    threading.Thread(target=late).start()
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, engine="tcp", connect_timeout_s=10)
    a.connect("b", f"127.0.0.1:{port}", "peer")
    assert b.reverse_link("a", timeout=5) is not None
    a.close()
    b.close()


def test_a_peer_that_dies_reaches_the_openers_error_handler():
    """An acceptor that accepts, then vanishes without ending the stream (its process crashed): on_error, as an
    UNAVAILABLE stream is on the gRPC engine."""
    errors, got = [], threading.Event()
    srv = socket.create_server(("127.0.0.1", 0))
    port = srv.getsockname()[1]

    def crash():
        conn, _ = srv.accept()
        tcp.read_hello(conn, TOKEN, ("peer",))
        tcp.accept_reply(conn)
        conn.close()

    threading.Thread(target=crash).start()
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, engine="tcp",
                      on_error=lambda peer, e: (errors.append((peer, e)), got.set()))
    a.connect("b", f"127.0.0.1:{port}", "peer")
    assert got.wait(10)
    assert errors[0][0] == "b" and isinstance(errors[0][1], tcp.StreamBroken)
    a.close(0.5)
    srv.close()
