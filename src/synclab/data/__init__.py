"""Training data by name: a seeded synthetic dataset, or CIFAR-10 from a local folder.

Every dataset answers ``batch(iteration, rank, world, batch_size) -> (x, y)``:
iteration t's global batch (``world * batch_size`` samples, in a seeded
per-epoch order) cut into contiguous per-rank slices, so that
``batch(t, 0, 1, world * b)`` equals the ranks' batches concatenated, bit for
bit — what lets a distributed run be checked against one process
(:mod:`synclab.data.order`).
"""

from __future__ import annotations

from pathlib import Path

from synclab.data.cifar10 import SPEC as CIFAR10_SPEC
from synclab.data.cifar10 import Cifar10
from synclab.data.synthetic import SyntheticClassification
from synclab.models.spec import InputSpec

__all__ = ["DATASET_NAMES", "Cifar10", "SyntheticClassification", "make_dataset"]

DATASET_NAMES = ("synthetic", "cifar10")


def make_dataset(name: str, input_spec: InputSpec, seed: int, root: str | Path | None = None,
                 size: int = 50_000) -> SyntheticClassification | Cifar10:
    """The dataset ``name`` for a model whose input is ``input_spec``.

    ``synthetic`` generates ``size`` samples shaped by ``input_spec`` (``root`` must be
    None). ``cifar10`` reads the first ``size`` training images from ``root``
    (``FileNotFoundError`` naming the folder if they are not there) and needs a model
    taking 3x32x32 images with 10 classes.
    """
    if name == "synthetic":
        if root is not None:
            raise ValueError(f"data.root is only read by the cifar10 dataset, got root={str(root)!r} for synthetic")
        return SyntheticClassification(input_spec, seed, size)
    if name == "cifar10":
        if input_spec != CIFAR10_SPEC:
            raise ValueError(f"cifar10 provides 3x32x32 images in 10 classes, but the model expects {input_spec}")
        if root is None:
            raise FileNotFoundError("the cifar10 dataset needs data.root: a folder with the CIFAR-10 python batches")
        return Cifar10(root, seed, size)
    raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASET_NAMES)}")
