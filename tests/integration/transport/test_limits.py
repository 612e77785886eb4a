"""Memory bounded against any peer: message and per-peer limits on a live gRPC server (loopback)."""

import resource

import grpc
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport
from synclab.wire import pb, rpc
from synclab.wire.channels import open_channel
from synclab.wire.frames import Message, MessageId, MessageLimits

TOKEN = "t0ken"
CHUNK = 64 << 10
LIMITS = MessageLimits(max_message_bytes=1 << 20, max_peer_bytes=4 << 20)
# RSS may grow by at most this over the whole fuzz run: the per-peer caps (4 MiB staged + 4 MiB waiting in
# the inbox) plus gRPC's and the allocator's working memory. Without the caps one 8 GiB header would break it.
RSS_BOUND_BYTES = 96 << 20


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


@pytest.fixture(scope="module")
def server():
    inbox = Inbox(LIMITS)
    node = NodeTransport("srv", TOKEN, on_message=inbox.deliver, chunk_bytes=CHUNK, limits=LIMITS)
    port = node.serve("127.0.0.1", 0, peer=True)
    channel = open_channel(f"127.0.0.1:{port}", TOKEN, "fuzzer", chunk_bytes=CHUNK)
    yield port, inbox, rpc.PeerStub(channel)
    channel.close()
    node.close()


def _well_formed_round_trip(port: int, inbox: Inbox, n: int) -> None:
    """A fresh client sends a multi-chunk tensor; the server reassembles it."""
    sender = NodeTransport(f"good{n}", TOKEN, on_message=lambda m: None, chunk_bytes=CHUNK)
    try:
        link = sender.connect("srv", f"127.0.0.1:{port}", "peer")
        t = torch.arange(100_000, dtype=torch.float32)  # 400 kB: 7 chunks
        mid = MessageId(pb.COLLECTIVE, "ok", 0, n)
        fut = inbox.expect(f"good{n}", mid)
        link.send(Message(mid, t)).result(timeout=10)
        assert torch.equal(fut.result(timeout=10).tensor, t)
    finally:
        sender.close()


headers = st.fixed_dictionaries({
    "kind": st.integers(0, 12),
    "key": st.sampled_from(["a", "b", "c"]),
    "iteration": st.integers(0, 3),
    "offset": st.one_of(st.just(0), st.integers(0, 1 << 40)),
    "total_bytes": st.one_of(st.sampled_from([0, 4, 1 << 20, (1 << 20) + 1, 8 << 30, (1 << 64) - 1]),
                             st.integers(0, 1 << 40)),
    "dtype": st.integers(0, 10),
    "shape": st.lists(st.one_of(st.integers(-2, 1 << 21), st.sampled_from([1 << 62, 2 << 30])), max_size=3),
})
frames = st.lists(st.tuples(headers, st.integers(0, CHUNK)), min_size=1, max_size=6)


def test_fuzzed_headers_never_stop_the_server_nor_grow_its_memory(server):
    port, inbox, stub = server
    _well_formed_round_trip(port, inbox, 0)
    rss_before = _rss_bytes()
    codes = set()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), database=None)
    @given(frames)
    def fuzz(batch):
        stream = [pb.Frame(header=pb.FrameHeader(sender="fuzzer", **h), payload=bytes(n)) for h, n in batch]
        try:
            list(stub.Stream(iter(stream), timeout=10))
            codes.add(grpc.StatusCode.OK)
        except grpc.RpcError as e:
            codes.add(e.code())
            assert e.code() == grpc.StatusCode.INVALID_ARGUMENT, e.details()

    fuzz()
    _well_formed_round_trip(port, inbox, 1)
    grown = _rss_bytes() - rss_before
    assert grown < RSS_BOUND_BYTES, f"RSS grew by {grown} bytes"
    assert grpc.StatusCode.INVALID_ARGUMENT in codes
    assert inbox.early_bytes("fuzzer") <= LIMITS.max_peer_bytes


def test_8_gib_header_on_a_live_stream_is_refused_and_names_the_sizes(server):
    port, inbox, stub = server
    frame = pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="huge", total_bytes=8 << 30, dtype=pb.UINT8,
                                           shape=[8 << 30]), payload=bytes(16))
    rss_before = _rss_bytes()
    with pytest.raises(grpc.RpcError) as e:
        list(stub.Stream(iter([frame]), timeout=5))
    assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "fuzzer announced a message 'huge' of 8589934592 bytes" in e.value.details()
    assert "at most 1048576 bytes" in e.value.details()
    assert _rss_bytes() - rss_before < 64 << 20
    _well_formed_round_trip(port, inbox, 2)


def test_peer_over_its_early_cap_loses_its_stream_not_the_server():
    limits = MessageLimits(max_message_bytes=1 << 16, max_peer_bytes=1 << 17)
    inbox = Inbox(limits)
    srv = NodeTransport("srv", TOKEN, on_message=inbox.deliver, chunk_bytes=CHUNK, limits=limits)
    port = srv.serve("127.0.0.1", 0, peer=True)
    stub = rpc.PeerStub(open_channel(f"127.0.0.1:{port}", TOKEN, "flood", chunk_bytes=CHUNK))
    flood = [pb.Frame(header=pb.FrameHeader(kind=pb.COLLECTIVE, key="k", iteration=i, total_bytes=1 << 15,
                                            dtype=pb.UINT8, shape=[1 << 15], sender="flood"), payload=bytes(1 << 15))
             for i in range(100)]
    try:
        with pytest.raises(grpc.RpcError) as e:
            list(stub.Stream(iter(flood), timeout=10))
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "per-peer limit" in e.value.details()
        assert inbox.early_bytes("flood") <= limits.max_peer_bytes
    finally:
        srv.close()
