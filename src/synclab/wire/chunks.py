"""How large a frame's payload is: the chunk sizes of the wire and ``transport.chunk_bytes: auto``.

Plain numbers, apart from :mod:`synclab.wire.frames` (which builds frames from tensors and so
imports torch): the spec resolves ``auto`` through this module, and what reads a spec (the CLI,
a container's supervisor) does not load torch for it.
"""

from __future__ import annotations

DEFAULT_CHUNK_BYTES = 1 << 20  # a frame's payload on shaped links: the priority scheduler's preemption step (P3 §4.2)
FAST_CHUNK_BYTES = 4 << 20  # on unshaped links and links the host runs at 10 Gbit/s or more
FAST_LINK_BPS = 10_000_000_000


def auto_chunk_bytes(rate_bps: float | None, dilation: float = 1.0) -> int:
    """``transport.chunk_bytes: auto``: 4 MiB frames where the host moves bytes as fast as it can (unshaped, or a
    link of ``rate_bps / dilation`` ≥ 10 Gbit/s), else 1 MiB.

    Why: on a fast link the data plane is CPU-bound and part of its cost is per frame (a thread handoff on each
    side of every gRPC message, the scheduler, the reassembler): 4 MiB frames cut the ring all-reduce's CPU per
    GB by about a quarter (CHANGELOG.md, "The data plane beside gloo"). On a shaped link the frame is the
    step at which a more urgent message overtakes (P3 §4.2), so it stays 1 MiB there: at 1 Gbit/s 1 MiB is 8 ms
    of the link, and every reproduction target keeps the frames it was measured with."""
    if rate_bps is None or rate_bps / dilation >= FAST_LINK_BPS:
        return FAST_CHUNK_BYTES
    return DEFAULT_CHUNK_BYTES
