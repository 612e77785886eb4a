"""scikit-learn's handwritten digits: 1,797 real 8x8 grey images in 10 classes, shipped inside the package.

The only real dataset every SyncLab machine has (``load_digits`` reads a file
that comes with scikit-learn; nothing is downloaded), so it carries SyncLab's
reduced accuracy experiments (docs/how-to/reproduce-a-figure.md, "Accuracy on a real
dataset"; results in docs/results/accuracy/).

* A fixed stratified split, the same for every run seed: 360 test images
  (20 %, each class's share by largest remainder) and 1,437 training images.
  Which images of a class go to the test split is decided by a hash of
  (:data:`SPLIT_SEED`, image index) (:mod:`synclab.data.hashing`), so the split
  does not depend on the scikit-learn or torch version.
* Pixels (0..16) are divided by 16: features in [0, 1], flattened to 64 values
  in row order. The model input is a 64-feature vector with 10 classes
  (``mlp`` with ``input_dim: 64``).
* Training batches follow the seeded per-epoch order of every SyncLab dataset
  (:mod:`synclab.data.order`) over the first ``size`` training images.
"""

from __future__ import annotations

import torch

from synclab.data.hashing import counters, derive_key
from synclab.data.order import EpochOrder
from synclab.models.spec import InputSpec

SPEC = InputSpec("vector", (64,), 10)
TOTAL = 1_797
TEST_SIZE = 360
TRAIN_SIZE = TOTAL - TEST_SIZE
SPLIT_SEED = 0          # the split is part of the dataset, not of a run: run.seed never moves it
_SPLIT_STREAM = 20
PIXEL_MAX = 16.0


def load_images() -> tuple[torch.Tensor, torch.Tensor]:
    """All 1,797 images as float32 ``(1797, 64)`` in [0, 1] and their int64 labels, in scikit-learn's order."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:  # a dependency of synclab; missing only in a broken environment
        raise ImportError("the digits dataset needs scikit-learn (pip install scikit-learn)") from e
    bunch = load_digits()
    x = torch.as_tensor(bunch.data, dtype=torch.float32) / PIXEL_MAX
    y = torch.as_tensor(bunch.target, dtype=torch.int64)
    if x.shape != (TOTAL, 64):
        raise ValueError(f"scikit-learn's load_digits returned {tuple(x.shape)} images, expected ({TOTAL}, 64)")
    return x, y


def stratified_split(labels: torch.Tensor, test_size: int, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train, test) index tensors, both ascending: each class gives ``test_size`` x its share of the
    samples (largest remainder, ties to the smaller class id), chosen by the hash of (seed, index)."""
    n = len(labels)
    if not 0 < test_size < n:
        raise ValueError(f"test_size must be in (0, {n}), got {test_size}")
    classes, counts = torch.unique(labels, return_counts=True)
    exact = counts.double() * test_size / n
    quota = exact.floor().long()
    short = test_size - int(quota.sum())
    by_remainder = sorted(range(len(classes)), key=lambda c: (-(float(exact[c]) - int(quota[c])), c))
    for c in by_remainder[:short]:
        quota[c] += 1
    keys = counters(derive_key(seed, _SPLIT_STREAM), torch.arange(n))
    test = []
    for c, q in zip(classes.tolist(), quota.tolist()):
        members = torch.nonzero(labels == c).flatten()
        test.append(members[torch.argsort(keys[members], stable=True)[:q]])
    test_idx = torch.sort(torch.cat(test)).values
    is_test = torch.zeros(n, dtype=torch.bool)
    is_test[test_idx] = True
    return torch.nonzero(~is_test).flatten(), test_idx


class Digits:
    """``batch(iteration, rank, world, batch_size) -> (x, y)`` over the training split; ``test_split()`` the rest."""

    def __init__(self, seed: int, size: int = TRAIN_SIZE):
        if isinstance(size, bool) or not isinstance(size, int) or not 1 <= size <= TRAIN_SIZE:
            raise ValueError(f"digits size must be an integer in [1, {TRAIN_SIZE}] (the training split), "
                             f"got {size!r}")
        x, y = load_images()
        train, test = stratified_split(y, TEST_SIZE, SPLIT_SEED)
        self.train_x, self.train_y = x[train][:size], y[train][:size]
        self.test_x, self.test_y = x[test], y[test]
        self.input_spec, self.seed, self.size = SPEC, seed, size
        self.order = EpochOrder(size, seed)

    def __len__(self) -> int:
        return self.size

    def batch(self, iteration: int, rank: int, world: int, batch_size: int) -> tuple[torch.Tensor, torch.Tensor]:
        indices = self.order.indices(iteration, rank, world, batch_size)
        return self.train_x[indices], self.train_y[indices]

    def test_split(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The 360 held-out images and labels (never in a training batch)."""
        return self.test_x, self.test_y
