"""CIFAR-10 from the "python version" pickles a user already has on disk (never downloaded).

``root`` is the ``cifar-10-batches-py`` folder (or the folder holding it) with
``data_batch_1`` ... ``data_batch_5``: 50,000 32x32 colour training images in
10 classes (Krizhevsky 2009; Stanza Table 5, SSD-SGD §5, P3 §5.5 train on it).
Samples are read in the same seeded per-epoch order as the synthetic data
(:mod:`synclab.data.order`) and normalised per channel; no augmentation, so a
batch is a pure function of (seed, iteration, rank, world, batch_size).
"""

from __future__ import annotations

import pickle
from pathlib import Path

import torch

from synclab.data.order import EpochOrder
from synclab.models.spec import InputSpec

TRAIN_FILES = tuple(f"data_batch_{i}" for i in range(1, 6))
TRAIN_SIZE = 50_000
SPEC = InputSpec("image", (3, 32, 32), 10)
# Per-channel mean and standard deviation of the training images (values in [0, 1]).
MEAN = (0.4914, 0.4822, 0.4465)
STD = (0.2470, 0.2435, 0.2616)


def find_batches(root: str | Path) -> list[Path]:
    """The 5 training pickles under ``root``; ``FileNotFoundError`` naming what is missing where."""
    base = Path(root).expanduser()
    for folder in (base, base / "cifar-10-batches-py"):
        if all((folder / name).is_file() for name in TRAIN_FILES):
            return [folder / name for name in TRAIN_FILES]
    missing = [name for name in TRAIN_FILES if not (base / name).is_file()]
    raise FileNotFoundError(
        f"CIFAR-10 training batches not found in {str(base)!r} or {str(base / 'cifar-10-batches-py')!r} "
        f"(missing {', '.join(missing)}); point data.root at the extracted 'python version' archive")


class Cifar10:
    """``batch(iteration, rank, world, batch_size) -> (x, y)`` over the first ``size`` training images."""

    def __init__(self, root: str | Path, seed: int, size: int = TRAIN_SIZE):
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= TRAIN_SIZE:
            raise ValueError(f"CIFAR-10 size must be an integer in [1, {TRAIN_SIZE}], got {size!r}")
        images, labels = [], []
        for path in find_batches(root):
            with open(path, "rb") as f:
                d = pickle.load(f, encoding="bytes")
            images.append(torch.as_tensor(d[b"data"], dtype=torch.uint8).view(-1, 3, 32, 32))
            labels.append(torch.as_tensor(d[b"labels"], dtype=torch.int64))
        found = sum(len(t) for t in labels)
        if size > found:
            raise ValueError(f"CIFAR-10 size {size} exceeds the {found} training images found under {str(root)!r}")
        self.images = torch.cat(images)[:size]
        self.labels = torch.cat(labels)[:size]
        self.input_spec, self.seed, self.size = SPEC, seed, size
        self.order = EpochOrder(size, seed)
        self._mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        self._std = torch.tensor(STD).view(1, 3, 1, 1)

    def __len__(self) -> int:
        return self.size

    def batch(self, iteration: int, rank: int, world: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        indices = self.order.indices(iteration, rank, world, batch_size)
        x = self.images[indices].to(torch.float32) / 255.0
        return (x - self._mean) / self._std, self.labels[indices]
