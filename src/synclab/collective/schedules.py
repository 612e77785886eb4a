"""All-reduce schedules as data: who sends what to whom, step by step.

A schedule is a list of ``Step``s. In one step every listed ``Transfer``
happens at once: ``src`` sends its current copy of ``segment`` (or of the
whole vector when ``segment`` is None) to ``dst``, which then either adds it
to its own copy (``op == "reduce"``) or replaces its copy with it
(``op == "copy"``). Every transfer carries the sender's data as it was
before the step, so a pairwise exchange is two transfers in one step.

Nothing here moves bytes; the transport runs these steps, and
``simulate_allreduce`` is the reference for what running them must produce.

- ``ring_allreduce_schedule``: reduce-scatter then all-gather around a ring,
  2(n-1) steps, the vector cut into n segments (the "Ring" row of MG-WFBP's
  Table 2).
- ``recursive_doubling_schedule``: Stanza §4.1.2, including its rule for a
  number of ranks that is not a power of two; floor(log2 n) + 2 rounds then,
  log2 n otherwise.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple

__all__ = [
    "Step",
    "Transfer",
    "recursive_doubling_schedule",
    "ring_allreduce_schedule",
    "segment_bounds",
    "simulate_allreduce",
]


class Transfer(NamedTuple):
    src: int
    dst: int
    segment: int | None = None  # ring segment index; None = the whole vector


@dataclass(frozen=True)
class Step:
    op: Literal["reduce", "copy"]  # what dst does with what it receives
    transfers: tuple[Transfer, ...]


def _check_ranks(n: int) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (number of ranks) must be an integer >= 1, got {n!r}")


def segment_bounds(length: int, parts: int) -> list[tuple[int, int]]:
    """[start, stop) of ``parts`` near-equal segments of a vector of ``length``.

    The first ``length % parts`` segments hold one element more; segments
    are empty when the vector is shorter than ``parts``.
    """
    if length < 0:
        raise ValueError(f"length must be >= 0, got {length!r}")
    _check_ranks(parts)
    base, extra = divmod(length, parts)
    bounds, start = [], 0
    for index in range(parts):
        stop = start + base + (1 if index < extra else 0)
        bounds.append((start, stop))
        start = stop
    return bounds


def ring_allreduce_schedule(n: int) -> list[Step]:
    """Ring all-reduce over ranks 0..n-1 (rank r sends only to r+1 mod n).

    Reduce-scatter, steps s = 0..n-2: rank r sends segment (r - s) mod n,
    which r+1 adds to its own; afterwards rank r holds the full sum of
    segment (r + 1) mod n. All-gather, steps s = 0..n-2: rank r sends
    segment (r + 1 - s) mod n, which r+1 copies. 2(n-1) steps; none for n = 1.
    """
    _check_ranks(n)
    steps = []
    for s in range(n - 1):
        steps.append(
            Step("reduce", tuple(Transfer(r, (r + 1) % n, (r - s) % n) for r in range(n)))
        )
    for s in range(n - 1):
        steps.append(
            Step("copy", tuple(Transfer(r, (r + 1) % n, (r + 1 - s) % n) for r in range(n)))
        )
    return steps


def recursive_doubling_schedule(n: int) -> list[Step]:
    """Recursive-doubling all-reduce of whole vectors (Stanza §4.1.2).

    With p = 2^floor(log2 n) and r = n - p surplus ranks:

    1. if r > 0, one round in which surplus rank p+i sends its vector to rank
       i, which adds it (i = 0..r-1);
    2. log2 p rounds among ranks 0..p-1: in round j, rank x exchanges its
       partial sum with rank x XOR 2^j, 2^j places away as in Fig. 5, and
       both add;
    3. if r > 0, one round in which rank i sends the result to p+i, which
       copies it.

    Stanza picks the surplus ranks and their partners at random; this
    schedule fixes them (the highest ranks, paired with the lowest), which
    changes who does the work, not the number of rounds: log2 n when n is a
    power of two, floor(log2 n) + 2 otherwise.
    """
    _check_ranks(n)
    core = 1 << (n.bit_length() - 1)  # p = 2^floor(log2 n)
    surplus = n - core
    steps = []
    if surplus:
        steps.append(Step("reduce", tuple(Transfer(core + i, i) for i in range(surplus))))
    distance = 1
    while distance < core:
        steps.append(Step("reduce", tuple(Transfer(x, x ^ distance) for x in range(core))))
        distance *= 2
    if surplus:
        steps.append(Step("copy", tuple(Transfer(i, core + i) for i in range(surplus))))
    return steps


def simulate_allreduce(
    steps: Sequence[Step], vectors: Sequence[Sequence[float]]
) -> list[list[float]]:
    """Run a schedule over one vector per rank and return every rank's result.

    Segments are ``segment_bounds(len(vector), len(vectors))``. A receiver
    adds what it receives to its own copy (``own + received``); IEEE addition
    is commutative, so both sides of an exchange compute the same bits.
    """
    n = len(vectors)
    _check_ranks(n)
    length = len(vectors[0])
    if any(len(vector) != length for vector in vectors):
        raise ValueError("every rank's vector must have the same length")
    bounds = segment_bounds(length, n)
    state = [list(vector) for vector in vectors]
    for step in steps:
        before = [list(vector) for vector in state]
        for transfer in step.transfers:
            start, stop = (0, length) if transfer.segment is None else bounds[transfer.segment]
            received = before[transfer.src][start:stop]
            if step.op == "reduce":
                mine = state[transfer.dst]
                mine[start:stop] = [x + y for x, y in zip(mine[start:stop], received, strict=True)]
            else:
                state[transfer.dst][start:stop] = received
    return state
