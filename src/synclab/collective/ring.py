"""Ring all-reduce over the transport: reduce-scatter then all-gather, N−1 steps each.

Each rank sends to ``rank+1`` and receives from ``rank−1``. The tensor is cut
into ``world`` segments; after the reduce-scatter rank r holds the full sum of
segment (r+1) mod N, and the all-gather circulates the finished segments, so
every rank ends with the same bytes. Traffic per rank: 2·(N−1)/N of the tensor.
"""

from __future__ import annotations

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

    def exchange(send_idx: int, recv_idx: int) -> torch.Tensor:
        nonlocal step
        lo, hi = seg[send_idx]
        to_next.send(Message(MessageId(pb.COLLECTIVE, key, send_idx, iteration, step), flat[lo:hi].clone(), priority))
        got = inbox.expect(prev_name, MessageId(pb.COLLECTIVE, key, recv_idx, iteration, step)).result()
        step += 1
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
    return flat
