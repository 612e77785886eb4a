"""Deterministic synthetic classification data, sharded across workers by rank.

Sample i of the dataset is class prototype c_i plus noise, both derived from the
seed; the global batch of iteration t takes ``world * batch_size`` consecutive
indices of a seeded per-epoch permutation and rank r gets the r-th contiguous
slice of it, so one process with the global batch sees exactly the
concatenation of every worker's batch.
"""

from __future__ import annotations

from pathlib import Path

import torch


class SyntheticClassification:
    def __init__(self, input_spec, seed: int, size: int = 50_000, noise: float = 1.0):
        self.spec, self.seed, self.size, self.noise = input_spec, seed, size, noise
        g = torch.Generator().manual_seed(seed)
        self.labels = torch.randint(0, input_spec.num_classes, (size,), generator=g)
        self.prototypes = torch.randn((input_spec.num_classes, *input_spec.shape), generator=g)
        self._perms: dict[int, torch.Tensor] = {}

    def _perm(self, epoch: int) -> torch.Tensor:
        if epoch not in self._perms:
            self._perms = {epoch: torch.randperm(self.size, generator=torch.Generator().manual_seed(
                self.seed * 1_000_003 + epoch))}
        return self._perms[epoch]

    def samples(self, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.labels[indices]
        noise = torch.stack([torch.randn(self.spec.shape, generator=torch.Generator().manual_seed(
            (self.seed << 32) + int(i))) for i in indices])
        return self.prototypes[y] + self.noise * noise, y

    def batch(self, iteration: int, rank: int, world: int, batch_size: int):
        global_batch = world * batch_size
        start = iteration * global_batch + rank * batch_size
        idx = []
        for pos in range(start, start + batch_size):
            epoch, k = divmod(pos, self.size)
            idx.append(int(self._perm(epoch)[k]))
        return self.samples(torch.tensor(idx))


def make_dataset(name: str, input_spec, seed: int, root: str | None = None, size: int = 50_000):
    if name == "synthetic":
        return SyntheticClassification(input_spec, seed, size)
    if name == "cifar10":
        path = Path(root or "")
        if not (path / "data_batch_1").exists():
            raise FileNotFoundError(f"CIFAR-10 python batches not found in {path} (expected data_batch_1..5)")
        raise NotImplementedError("cifar10 loading")
    raise ValueError(f"unknown dataset {name!r}")
