"""Recursive-doubling all-reduce over the transport (Stanza §4.1.2).

The executor of :func:`synclab.collective.schedules.recursive_doubling_schedule`:
a group of ``n`` ranks sums one whole vector in ``log2 n`` rounds when ``n`` is
a power of two, otherwise in ``floor(log2 n) + 2`` — one round in which the
surplus ranks hand their vectors to partners, the doubling rounds among the
other ``2^floor(log2 n)``, one round sending the sum back to the surplus ranks.
Every round moves the whole vector (eq. 3 charges ``P_c / B`` per round).

A group is a list of worker ranks; the schedule speaks of positions in it, so
the same code reduces Stanza's CONV workers and, separately, its FC workers.
A receiver adds what it receives to its own copy; IEEE addition is
commutative, so both sides of an exchange hold the same bits and every rank
ends with an identical vector.

The vector is sent without a copy: the link reads it chunk by chunk, and a
round waits for its sends to be handed to gRPC before the vector changes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import lru_cache

import torch

from synclab.collective.schedules import Step, recursive_doubling_schedule
from synclab.transport.inbox import Inbox
from synclab.transport.link import Link
from synclab.wire import pb
from synclab.wire.frames import Message, MessageId

__all__ = ["recursive_doubling_allreduce_", "recursive_doubling_peers"]


@lru_cache(maxsize=64)
def _schedule(n: int) -> tuple[Step, ...]:
    return tuple(recursive_doubling_schedule(n))


def recursive_doubling_peers(position: int, size: int) -> set[int]:
    """Positions that ``position`` sends to in a group of ``size`` (the streams it must open)."""
    if not 0 <= position < size:
        raise ValueError(f"position must be in [0, {size}), got {position!r}")
    return {t.dst for step in _schedule(size) for t in step.transfers if t.src == position}


def recursive_doubling_allreduce_(flat: torch.Tensor, *, group: Sequence[int], rank: int, key: str, iteration: int,
                                  links: Mapping[int, Link], inbox: Inbox, names: Mapping[int, str],
                                  priority: int = 0) -> torch.Tensor:
    """Sum ``flat`` (1-D, contiguous) over the ranks of ``group``, in place; returns ``flat``.

    ``links[r]`` is this rank's stream to rank ``r`` and ``names[r]`` the node
    name ``r``'s messages arrive under; only the partners the schedule gives
    this rank are used (see :func:`recursive_doubling_peers`). Messages are
    ``COLLECTIVE`` with ``key``, ``iteration`` and the round as tag.
    """
    if not flat.is_contiguous() or flat.dim() != 1:
        raise ValueError("flat must be a contiguous 1-D tensor")
    group = list(group)
    me = group.index(rank)  # ValueError when rank is not in the group
    for round_no, step in enumerate(_schedule(len(group))):
        incoming = [group[t.src] for t in step.transfers if t.dst == me]
        outgoing = [group[t.dst] for t in step.transfers if t.src == me]
        if step.op == "copy" and len(incoming) > 1:
            raise ValueError(f"round {round_no} copies into position {me} from {len(incoming)} ranks")
        mid = MessageId(pb.COLLECTIVE, key, 0, iteration, round_no)
        arrivals = [inbox.expect(names[src], mid) for src in incoming]
        sent = [links[dst].send(Message(mid, flat, priority)) for dst in outgoing]
        received = [a.result().tensor for a in arrivals]
        for s in sent:  # the link reads ``flat`` lazily: it must not change before the last chunk left
            s.result()
        for tensor in received:
            tensor = tensor.to(flat.device)
            if step.op == "reduce":
                flat.add_(tensor)
            else:
                flat.copy_(tensor)
    return flat
