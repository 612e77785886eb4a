"""Which samples an iteration reads: a seeded permutation per epoch, cut into global batches.

Samples are read as one endless stream: epoch e visits every index of
``[0, size)`` once, in a permutation fixed by (seed, e). Iteration t's global
batch is stream positions ``[t*G, (t+1)*G)`` with ``G = world * batch_size``;
rank r reads the contiguous slice ``[r*batch_size, (r+1)*batch_size)`` of it.
So the union of the ranks' slices is exactly the single-process global batch,
in the same order (a batch may straddle two epochs; nothing is dropped).
"""

from __future__ import annotations

import torch

from synclab.data.hashing import counters, derive_key

_ORDER_STREAM = 1


def check_batch_request(iteration: int, rank: int, world: int, batch_size: int) -> None:
    for name, value, minimum in (("iteration", iteration, 0), ("world", world, 1), ("batch_size", batch_size, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")
    if isinstance(rank, bool) or not isinstance(rank, int) or not 0 <= rank < world:
        raise ValueError(f"rank must be an integer in [0, world={world}), got {rank!r}")


class EpochOrder:
    """Stream position -> sample index, with the last two epochs' permutations cached."""

    def __init__(self, size: int, seed: int):
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size < 2 ** 31:
            raise ValueError(f"dataset size must be an integer in [1, 2**31), got {size!r}")
        self.size, self.seed = size, seed
        self._cache: dict[int, torch.Tensor] = {}

    def permutation(self, epoch: int) -> torch.Tensor:
        perm = self._cache.get(epoch)
        if perm is None:
            # Hash keys of distinct indices are distinct (injective counter, bijective hash): no ties.
            keys = counters(derive_key(self.seed, _ORDER_STREAM, epoch), torch.arange(self.size))
            perm = torch.argsort(keys, stable=True)
            if len(self._cache) >= 2:
                self._cache.pop(min(self._cache))
            self._cache[epoch] = perm
        return perm

    def indices(self, iteration: int, rank: int, world: int, batch_size: int) -> torch.Tensor:
        """Sample indices (int64, ``batch_size`` of them) that ``rank`` reads at ``iteration``."""
        check_batch_request(iteration, rank, world, batch_size)
        start = (iteration * world + rank) * batch_size
        positions = torch.arange(start, start + batch_size)
        epochs = positions // self.size
        offsets = positions % self.size
        out = torch.empty_like(positions)
        for e in range(int(epochs[0]), int(epochs[-1]) + 1):
            mask = epochs == e
            out[mask] = self.permutation(e)[offsets[mask]]
        return out
