"""Mutual TLS with a cluster CA, over real gRPC on loopback: the cluster's nodes talk, nobody else does."""


import grpc
import pytest
import torch

from synclab.transport.inbox import Inbox
from synclab.transport.node import NodeTransport
from synclab.wire import pb
from synclab.wire.channels import open_channel, open_stream
from synclab.wire.frames import Message, MessageId, chunk_frames
from synclab.wire.tls import ENV, TlsFiles, make_cluster_ca

TOKEN = "t0ken"


@pytest.fixture(scope="module")
def cluster_files(tmp_path_factory):
    return TlsFiles.load(make_cluster_ca(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def tls_server(cluster_files, monkeypatch):
    monkeypatch.setenv(ENV, str(cluster_files.directory))
    inbox = Inbox()
    node = NodeTransport("w1", TOKEN, on_message=inbox.deliver, chunk_bytes=64 << 10)
    port = node.serve("127.0.0.1", 0, peer=True)
    yield port, inbox
    node.close(0.5)


def _send(port, tls, tensor):
    channel = open_channel(f"127.0.0.1:{port}", TOKEN, "w0", 64 << 10, tls=tls)
    try:
        frames = chunk_frames(Message(MessageId(pb.COLLECTIVE, "x", 0, 1), tensor), "w0", 64 << 10)
        list(open_stream(channel, "peer")(iter(list(frames)), timeout=10))
    finally:
        channel.close()


def test_a_node_of_the_cluster_gets_through(tls_server, cluster_files):
    port, inbox = tls_server
    t = torch.arange(50_000, dtype=torch.float32)
    _send(port, cluster_files, t)
    msg = inbox.expect("w0", MessageId(pb.COLLECTIVE, "x", 0, 1)).result(timeout=10)
    assert torch.equal(msg.tensor, t)


def test_a_plain_client_is_refused(tls_server):
    port, _ = tls_server
    with pytest.raises(grpc.RpcError) as e:
        _send(port, None, torch.ones(4))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE


def test_a_certificate_of_another_ca_is_refused(tls_server, tmp_path):
    port, _ = tls_server
    stranger = TlsFiles.load(make_cluster_ca(tmp_path / "other"))
    with pytest.raises(grpc.RpcError) as e:
        _send(port, stranger, torch.ones(4))
    assert e.value.code() == grpc.StatusCode.UNAVAILABLE
