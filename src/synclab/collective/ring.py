"""Ring all-reduce over the transport: reduce-scatter then all-gather, N−1 steps each.

Each rank sends to ``rank+1`` and receives from ``rank−1``. The tensor is cut
into ``world`` segments; after the reduce-scatter rank r holds the full sum of
segment (r+1) mod N, and the all-gather circulates the finished segments, so
every rank ends with the same bytes. Traffic per rank: 2·(N−1)/N of the tensor.

Segments are sent as views of the tensor, not copies: the transport copies a
chunk's bytes when it cuts the chunk (``synclab.wire.codec``), so a segment is
overwritten only after its send's future has resolved.
"""

from __future__ import annotations

from concurrent.futures import Future

import torch

from synclab.collective.schedules import segment_bounds
from synclab.transport.inbox import Inbox
from synclab.transport.link import Link
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId


def ring_allreduce_(flat: torch.Tensor, *, rank: int, world: int, key: str, iteration: int, to_next: Link | None,
                    inbox: Inbox, prev_name: str, priority: int = 0) -> torch.Tensor:
    """Sum ``flat`` (1-D, contiguous) over all ranks, in place; returns ``flat``."""
    if world == 1:
        return flat
    seg = segment_bounds(flat.numel(), world)
    step = 0
    sending: dict[int, Future] = {}  # segment -> its last send; the transport reads it when the chunk is cut

    def exchange(send_idx: int, recv_idx: int) -> torch.Tensor:
        nonlocal step
        lo, hi = seg[send_idx]
        sending[send_idx] = to_next.send(Message(MessageId(pb.COLLECTIVE, key, send_idx, iteration, step),
                                                 flat[lo:hi], priority))
        got = inbox.expect(prev_name, MessageId(pb.COLLECTIVE, key, recv_idx, iteration, step)).result()
        step += 1
        if recv_idx in sending:  # about to overwrite a segment still queued to go out: let it be copied first
            sending.pop(recv_idx).result()
        return got.tensor

    for s in range(world - 1):  # reduce-scatter
        recv = (rank - s - 1) % world
        incoming = exchange((rank - s) % world, recv)
        lo, hi = seg[recv]
        flat[lo:hi].add_(incoming)
    for s in range(world - 1):  # all-gather
        recv = (rank - s) % world
        incoming = exchange((rank + 1 - s) % world, recv)
        lo, hi = seg[recv]
        flat[lo:hi].copy_(incoming)
    for fut in sending.values():  # the caller may reuse ``flat`` at once
        fut.result()
    return flat
