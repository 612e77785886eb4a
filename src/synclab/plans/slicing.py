"""P3 parameter slicing and priorities (Jayarajan et al., P3, §4 and §4.2).

Each layer's gradient (and parameter) tensor is cut into slices of at most
``slice_params`` parameters; P3 uses 50,000 (§5.6, Fig. 12). Slices go to the
parameter-server shards round robin "for load balancing" (§4.2), and inherit
the priority of their layer, which is the layer's position in the forward
pass: the first layer is consumed first by the next iteration, so it gets the
highest priority (§4).

Conventions:

- ``sizes[i]`` is the parameter count of tensor ``i`` in forward order
  (index 0 is the first tensor the forward pass uses); ``key`` is that index.
- A tensor of n parameters gives ceil(n / slice_params) slices; all but the
  last hold exactly ``slice_params`` parameters, the last holds the rest.
- Priority: smaller number = higher priority; priority = key, so tensor 0 has
  priority 0. Slices of one tensor share its priority (§4: "inherit").
- Round robin runs once over the whole model, not per tensor: slices are
  numbered in (key, slice_index) order - tensor 0's slices first, then tensor
  1's, and so on - and the g-th slice in that order goes to shard g % shards.
  The assignment therefore does not depend on the order in which backward
  produces the gradients, so workers and servers agree on it up front.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["DEFAULT_SLICE_PARAMS", "Slice", "shard_loads", "slice_tensors"]

DEFAULT_SLICE_PARAMS = 50_000  # P3 §5.6: the throughput peak in Fig. 12


@dataclass(frozen=True)
class Slice:
    """One slice: parameters [offset, offset + length) of tensor ``key``."""

    key: int
    slice_index: int
    offset: int
    length: int
    shard: int
    priority: int


def slice_tensors(
    sizes: Sequence[int], slice_params: int = DEFAULT_SLICE_PARAMS, *, shards: int
) -> list[Slice]:
    """Cut every tensor into slices and assign shards and priorities (§4.2).

    Returns the slices in (key, slice_index) order, which is also the round-
    robin order. Refuses ``slice_params`` < 1, ``shards`` < 1 and tensor
    sizes < 1.
    """
    slice_params = _positive_int("slice_params", slice_params)
    shards = _positive_int("shards", shards)
    slices: list[Slice] = []
    for key, size in enumerate(sizes):
        size = _positive_int(f"sizes[{key}]", size)
        for slice_index, offset in enumerate(range(0, size, slice_params)):
            slices.append(
                Slice(
                    key=key,
                    slice_index=slice_index,
                    offset=offset,
                    length=min(slice_params, size - offset),
                    shard=len(slices) % shards,
                    priority=key,
                )
            )
    return slices


def _positive_int(name: str, value: object) -> int:
    """``value`` as an int >= 1 (numpy integers welcome), or ValueError naming ``name``."""
    try:
        number = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        number = None
    if isinstance(value, bool) or number is None or number < 1:
        raise ValueError(f"{name} must be an integer >= 1, got {value!r}")
    return number


def shard_loads(slices: Sequence[Slice], shards: int) -> list[int]:
    """Parameters held by each shard under an assignment."""
    loads = [0] * _positive_int("shards", shards)
    for piece in slices:
        loads[piece.shard] += piece.length
    return loads
