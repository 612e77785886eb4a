"""Placement of parameter tensors on PS shards, as MXNet's KVStore does it (P3 §4.1).

"Layers with size smaller than a fixed threshold are assigned to a randomly
chosen KVServer. Parameters of larger layers are split equally among the
KVServer" — threshold 10^6 parameters by default. The random choice is seeded
so every node derives the same placement.
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

KVSTORE_SPLIT_THRESHOLD_PARAMS = 1_000_000


@dataclass(frozen=True, slots=True)
class Partition:
    """One (key, slice) a shard owns: ``length`` params of the flattened tensor from ``offset``."""

    key: str
    slice: int
    offset: int
    length: int
    shard: int
    priority: int = 0

    def to_dict(self) -> dict:
        return asdict(self)


def kvstore_partitions(sizes: list[tuple[str, int]], shards: int, *, seed: int = 0,
                       threshold_params: int = KVSTORE_SPLIT_THRESHOLD_PARAMS) -> list[Partition]:
    """Partitions of each ``(key, numel)`` in order; big tensors cut into ``shards`` near-equal slices."""
    if shards < 1:
        raise ValueError(f"need at least one PS shard, got {shards}")
    rng = random.Random(seed)
    out: list[Partition] = []
    for key, numel in sizes:
        if numel <= 0:
            raise ValueError(f"tensor {key!r} has {numel} params")
        if numel > threshold_params and shards > 1:
            base, extra = divmod(numel, shards)
            offset = 0
            for s in range(shards):
                length = base + (1 if s < extra else 0)
                out.append(Partition(key, s, offset, length, s))
                offset += length
        else:
            out.append(Partition(key, 0, 0, numel, rng.randrange(shards)))
    return out
