"""Real gRPC streams over loopback between NodeTransports in one process."""

import threading

import grpc
import pytest
import torch

from support.rings import ring_over_transports
from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel
from synclab.wire.frames import Message, MessageId

TOKEN = "t0ken"


class Meter:
    def __init__(self):
        self.sent, self.received = {}, {}
        self.lock = threading.Lock()

    def add_sent(self, peer, kind, n):
        with self.lock:
            self.sent[peer] = self.sent.get(peer, 0) + n

    def add_received(self, peer, kind, n):
        with self.lock:
            self.received[peer] = self.received.get(peer, 0) + n

    def set_queue_bytes(self, peer, band, n):
        pass


@pytest.fixture
def pair():
    inbox_b, meter_a, meter_b = Inbox(), Meter(), Meter()
    a = NodeTransport("a", TOKEN, on_message=lambda m: None, meter=meter_a, chunk_bytes=64 << 10)
    b = NodeTransport("b", TOKEN, on_message=inbox_b.deliver, meter=meter_b, chunk_bytes=64 << 10)
    port = b.serve("127.0.0.1", 0, peer=True)
    link = a.connect("b", f"127.0.0.1:{port}", "peer")
    yield link, inbox_b, meter_a, meter_b, port
    a.close()
    b.close()


def test_multi_chunk_tensor_arrives_intact_and_is_counted(pair):
    link, inbox, meter_a, meter_b, _ = pair
    t = torch.randn(100_000)
    mid = MessageId(pb.COLLECTIVE, "grad", 0, 3)
    fut = inbox.expect("a", mid)
    link.send(Message(mid, t)).result(timeout=10)
    got = fut.result(timeout=10)
    assert torch.equal(got.tensor, t)
    assert meter_a.sent["b"] == 400_000 and meter_b.received["a"] == 400_000


def test_wrong_token_is_refused(pair):
    *_, port = pair
    stub = rpc.PeerStub(open_channel(f"127.0.0.1:{port}", "wrong", "intruder"))
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Stream(iter([pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k"))]), timeout=5))
    assert e.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_oversized_message_is_refused_by_grpc(pair):
    *_, port = pair
    stub = rpc.PeerStub(open_channel(f"127.0.0.1:{port}", TOKEN, "big", chunk_bytes=4 << 20))
    frame = pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=2 << 20, dtype=pb.UINT8,
                                           shape=[2 << 20]), payload=bytes(2 << 20))
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Stream(iter([frame]), timeout=5))
    assert e.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_malformed_frame_aborts_stream_with_invalid_argument(pair):
    *_, port = pair
    stub = rpc.PeerStub(open_channel(f"127.0.0.1:{port}", TOKEN, "bad"))
    frame = pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k", total_bytes=8, dtype=pb.FLOAT32, shape=[3]),
                     payload=bytes(8))
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Stream(iter([frame]), timeout=5))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "needs 12 bytes" in e.value.details()


@pytest.mark.parametrize("streamed", [True, False], ids=["into-place", "staged"])
@pytest.mark.parametrize("world,slow_rank0,pieces,numel", [
    (2, False, 1, 10_001), (3, False, 1, 10_001), (3, True, 1, 10_001), (4, True, 1, 10_001),
    (2, False, 3, 10_001), (3, True, 3, 10_001), (4, True, 5, 10_001), (3, False, 4, 7), (4, True, 1, 100_003)])
def test_ring_allreduce_over_real_streams(world, slow_rank0, pieces, numel, streamed):
    """With ``slow_rank0`` rank 0's egress is paced at 20 Mbit/s, so its segment sends queue while the ring goes
    on: segments are sent as views, and the ring must not overwrite one before its chunks are cut, nor return
    (the caller zeroes the tensor at once) before every send is. ``pieces`` > 1 pipelines parts of the tensor
    through the ring (4 parts of 7 elements: some of their 3 segments are empty). ``streamed``: the transports
    add or copy each chunk into place as it arrives (``sinks=inbox``), else segments are reassembled first; the
    sums must be bit-identical either way (100,003 elements: segments of several 16 KiB chunks)."""
    data = [torch.randn(numel) for _ in range(world)]
    expected = sum(data)
    results = ring_over_transports(data, pieces=pieces, streamed=streamed, slow_rank0=slow_rank0, token=TOKEN)
    for r in range(world):
        assert torch.allclose(results[r], expected, atol=1e-4)
        assert torch.equal(results[r], results[0])  # bit-identical on every rank


class OrderMeter(Meter):
    """Also records the order in which chunks left, per destination."""

    def __init__(self):
        super().__init__()
        self.order: list[str] = []

    def add_sent(self, peer, kind, n):
        super().add_sent(peer, kind, n)
        with self.lock:
            self.order.append(peer)


def test_an_urgent_message_to_one_peer_preempts_bulk_to_another():
    """P3 §4.2 across destinations: once a priority-0 message to shard A is queued, the node's priority-9 bulk to
    shard B stops (at most the chunk already taken goes on) until A's message is out; FIFO across links would
    interleave them chunk by chunk."""
    from synclab.transport.shaper import LinkShaper

    meter = OrderMeter()
    sinks = {n: NodeTransport(n, TOKEN, on_message=lambda m: None, chunk_bytes=64 << 10) for n in ("A", "B")}
    src = NodeTransport("w", TOKEN, on_message=lambda m: None, policy="priority", chunk_bytes=64 << 10,
                        meter=meter, shaper=LinkShaper(rate_bps=20e6, chunk_bytes=64 << 10))  # paced from the start: 26 ms a chunk
    try:
        links = {n: src.connect(n, f"127.0.0.1:{s.serve('127.0.0.1', 0, peer=True)}", "peer") for n, s in sinks.items()}
        bulk = links["B"].send(Message(MessageId(pb.COLLECTIVE, "bulk", 0, 1), torch.zeros(1 << 20), 9))  # 4 MiB
        while meter.sent.get("B", 0) < 2 * (64 << 10):
            threading.Event().wait(0.002)
        links["A"].send(Message(MessageId(pb.COLLECTIVE, "urgent", 0, 1), torch.zeros(128 << 10), 0)).result(30)
        bulk.result(60)
    finally:
        for n in (src, *sinks.values()):
            n.close(0.5)
    first, last = meter.order.index("A"), len(meter.order) - 1 - meter.order[::-1].index("A")
    assert meter.order.count("A") == 8  # 512 KiB in 64 KiB chunks
    assert meter.order[first:last + 1].count("B") <= 1, "".join(meter.order)
