"""The inbox's per-sender cap on messages that arrive before anyone waits for them (no network).

The same limits on a live gRPC server are tested in tests/integration/transport/test_limits.py."""

import pytest
import torch

from synclab.transport.inbox import Inbox, InboxFull
from synclab.wire import pb
from synclab.wire.frames import MessageId, MessageLimits, Received


def test_early_messages_are_capped_per_sender():
    inbox = Inbox(MessageLimits(max_message_bytes=1000, max_peer_bytes=3000))

    def msg(sender, it):
        return Received(MessageId(pb.COLLECTIVE, "k", 0, it), sender, 0, torch.zeros(200))  # 800 B + overhead

    for it in range(2):
        inbox.deliver(msg("w1", it))
    with pytest.raises(InboxFull, match="w1 sent .* per-peer limit is 3000 bytes"):
        inbox.deliver(msg("w1", 2))
    inbox.deliver(msg("w2", 0))  # another sender has its own allowance
    assert inbox.expect("w1", MessageId(pb.COLLECTIVE, "k", 0, 0)).result(timeout=1).tensor.numel() == 200
    inbox.deliver(msg("w1", 2))  # reading one frees its share
    assert inbox.early_bytes("w1") == 2 * (800 + 256)
