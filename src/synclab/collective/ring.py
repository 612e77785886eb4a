"""Ring all-reduce over the transport: reduce-scatter then all-gather, N−1 steps each, pipelined.

Each rank sends to ``rank+1`` and receives from ``rank−1``. The tensor is cut
into ``world`` segments; after the reduce-scatter rank r holds the full sum of
segment (r+1) mod N, and the all-gather circulates the finished segments, so
every rank ends with the same bytes. Traffic per rank: 2·(N−1)/N of the tensor.

Pipelining. Store-and-forward per step leaves the link idle while a rank waits
for the last byte of a segment, adds it and hands the next step's segment to
the transport. So the tensor is first cut into ``pieces`` contiguous parts, each
running the ring above on its own (segment ``i`` of part ``p`` is message index
``p·world + i``): as soon as a part's step arrives and is reduced, that part's
next step is queued, while later parts of the same step are still arriving.
The link stays busy through step changes and the idle gap shrinks from a
segment to a part of one (the chunked pipeline NCCL's ring uses). Each part is
a separate message, so ``pieces`` times the per-message cost; :func:`ring_pieces`
picks a count from the size (parts of at least ``min_piece_bytes``).

Segments are sent as views of the tensor, not copies: the transport copies a
chunk's bytes when it cuts the chunk (``synclab.wire.codec``), so a segment is
overwritten only after its send's future has resolved.

Receiving into place. Every step's destination is named to the inbox before
its bytes can arrive (``Inbox.expect_into`` with a :class:`TensorSink`): the
reduce-scatter's at the start, each all-gather step's when the reduce-scatter
sends the segment it will overwrite (its sink waits for that send). A transport
built with ``sinks=inbox`` then adds each arriving chunk into its slice of the
tensor (``flat[off:off+n].add_(chunk)``) or copies it there, on the stream's
reader thread while the next chunk is on its way: no staging buffer, the bytes
are touched once. Without it, each segment is reassembled first and applied
whole, as before. Sums are the same either way (element by element, in the
same order).
"""

from __future__ import annotations

from concurrent.futures import Future

import torch

from synclab.collective.schedules import segment_bounds
from synclab.transport.inbox import Inbox, TensorSink
from synclab.transport.link import Link
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId

MIN_PIECE_BYTES = 4 << 20  # a part's segment: 4 MiB (4 chunks of the default 1 MiB)
MAX_PIECES = 8


def ring_pieces(numel: int, world: int, element_bytes: int = 4, min_piece_bytes: int = MIN_PIECE_BYTES) -> int:
    """How many parts to pipeline a ring of ``numel`` elements in: each part's segment at least
    ``min_piece_bytes`` (so small all-reduces stay one message per step), at most ``MAX_PIECES``."""
    segment_bytes = numel * element_bytes / max(world, 1)
    return max(1, min(MAX_PIECES, int(segment_bytes // min_piece_bytes)))


def ring_allreduce_(flat: torch.Tensor, *, rank: int, world: int, key: str, iteration: int, to_next: Link | None,
                    inbox: Inbox, prev_name: str, priority: int = 0, pieces: int | None = 1) -> torch.Tensor:
    """Sum ``flat`` (1-D, contiguous; on any device: a GPU tensor is staged through the host) over all ranks,
    in place; returns ``flat``.

    ``pieces``: parts pipelined through the ring (1, the default: store and forward, what the strategies
    use until the pipeline is measured on a quiet host; None: :func:`ring_pieces`). Every rank must use
    the same count (it changes the message indices)."""
    if world == 1:
        return flat
    if flat.device.type != "cpu":
        # The transport reads and writes host memory (its sinks add chunks in place), so a GPU tensor goes
        # through a host copy and comes back once summed, as gloo stages a CUDA tensor through the host.
        host = flat.to("cpu")
        ring_allreduce_(host, rank=rank, world=world, key=key, iteration=iteration, to_next=to_next, inbox=inbox,
                        prev_name=prev_name, priority=priority, pieces=pieces)
        return flat.copy_(host)
    n_pieces = ring_pieces(flat.numel(), world, flat.element_size()) if pieces is None else pieces
    if n_pieces < 1:
        raise ValueError(f"pieces must be >= 1, got {pieces}")
    # segment bounds of every part, as absolute [lo, hi) in flat
    parts = [(plo, [(plo + lo, plo + hi) for lo, hi in segment_bounds(phi - plo, world)])
             for plo, phi in segment_bounds(flat.numel(), n_pieces)]
    sending: dict[tuple[int, int], Future] = {}  # (part, segment) -> its last send
    arrivals: dict[tuple[int, int], Future] = {}  # (part, step) -> that step's segment is in place

    def schedule(step: int) -> tuple[int, int, bool]:
        """(segment sent, segment received, reduce?) of ``step``: reduce-scatter, then all-gather."""
        s = step if step < world - 1 else step - (world - 1)
        if step < world - 1:
            return (rank - s) % world, (rank - s - 1) % world, True
        return (rank + 1 - s) % world, (rank - s) % world, False

    def expect(p: int, step: int, before: Future | None = None) -> None:
        _, idx, reduce = schedule(step)
        lo, hi = parts[p][1][idx]
        arrivals[(p, step)] = inbox.expect_into(
            prev_name, MessageId(pb.COLLECTIVE, key, p * world + idx, iteration, step),
            TensorSink(flat[lo:hi], reduce=reduce, before=before))

    def send(p: int, step: int) -> None:
        idx = schedule(step)[0]
        lo, hi = parts[p][1][idx]
        fut = to_next.send(Message(MessageId(pb.COLLECTIVE, key, p * world + idx, iteration, step), flat[lo:hi],
                                   priority))
        sending[(p, idx)] = fut
        if step < world - 1:  # all-gather step ``step`` overwrites this segment: not before this send has read it
            expect(p, step + world - 1, before=fut)

    steps = 2 * (world - 1)
    try:
        for p in range(n_pieces):  # the reduce-scatter's destinations, named before any byte can arrive for them
            for step in range(world - 1):
                expect(p, step)
        for p in range(n_pieces):
            send(p, 0)
        for step in range(steps):
            for p in range(n_pieces):
                arrivals.pop((p, step)).result()  # added (or copied) into ``flat`` chunk by chunk as it came
                if step + 1 < steps:
                    send(p, step + 1)
    except BaseException:
        for fut in arrivals.values():  # nothing may write into ``flat`` once we have given up on it
            fut.cancel()
        raise
    for fut in sending.values():  # the caller may reuse ``flat`` at once
        fut.result()
    return flat
