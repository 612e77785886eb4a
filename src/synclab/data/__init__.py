"""Training data by name: a seeded synthetic dataset, CIFAR-10 from a local folder, or scikit-learn's digits.

Every dataset answers ``batch(iteration, rank, world, batch_size) -> (x, y)``:
iteration t's global batch (``world * batch_size`` samples, in a seeded
per-epoch order) cut into contiguous per-rank slices, so that
``batch(t, 0, 1, world * b)`` equals the ranks' batches concatenated, bit for
bit — what lets a distributed run be checked against one process
(:mod:`synclab.data.order`).

A dataset with a held-out split (``digits``) also answers ``test_split() -> (x, y)``,
which ``run.eval_every`` evaluates (:data:`TEST_SPLIT_DATASETS`).
"""

from __future__ import annotations

from pathlib import Path

from synclab.data.cifar10 import SPEC as CIFAR10_SPEC
from synclab.data.cifar10 import Cifar10
from synclab.data.digits import SPEC as DIGITS_SPEC
from synclab.data.digits import Digits
from synclab.data.synthetic import SyntheticClassification
from synclab.models.spec import InputSpec

__all__ = ["DATASET_NAMES", "TEST_SPLIT_DATASETS", "Cifar10", "Digits", "SyntheticClassification",
           "make_dataset"]

DATASET_NAMES = ("synthetic", "cifar10", "digits")
TEST_SPLIT_DATASETS = ("digits",)  # the datasets with a held-out split (test_split())
DEFAULT_SIZE = 50_000              # synthetic and cifar10 when data.size is not set; digits: its training split


def required_input(name: str) -> InputSpec | None:
    """The model input a real dataset provides (None: synthetic, shaped by the model)."""
    return {"cifar10": CIFAR10_SPEC, "digits": DIGITS_SPEC}.get(name)


def make_dataset(name: str, input_spec: InputSpec, seed: int, root: str | Path | None = None,
                 size: int | None = None) -> SyntheticClassification | Cifar10 | Digits:
    """The dataset ``name`` for a model whose input is ``input_spec``.

    ``synthetic`` generates ``size`` samples shaped by ``input_spec`` (``root`` must be
    None). ``cifar10`` reads the first ``size`` training images from ``root``
    (``FileNotFoundError`` naming the folder if they are not there) and needs a model
    taking 3x32x32 images with 10 classes. ``digits`` (scikit-learn's, shipped with
    the package) trains on the first ``size`` of its 1,437 training images, holds
    360 out for ``test_split()``, and needs a model taking 64 features with 10
    classes (``mlp`` with ``input_dim: 64``). ``size`` None: 50,000 for synthetic and
    cifar10, the whole training split for digits.
    """
    if name in ("synthetic", "digits") and root is not None:
        raise ValueError(f"data.root is only read by the cifar10 dataset, got root={str(root)!r} for {name}")
    if name == "digits":
        if input_spec != DIGITS_SPEC:
            raise ValueError(f"digits provides 64-feature vectors (8x8 images) in 10 classes, but the model "
                             f"expects {input_spec}; use model mlp with options input_dim: 64, num_classes: 10")
        return Digits(seed) if size is None else Digits(seed, size)
    size = DEFAULT_SIZE if size is None else size
    if name == "synthetic":
        return SyntheticClassification(input_spec, seed, size)
    if name == "cifar10":
        if input_spec != CIFAR10_SPEC:
            raise ValueError(f"cifar10 provides 3x32x32 images in 10 classes, but the model expects {input_spec}")
        if root is None:
            raise FileNotFoundError("the cifar10 dataset needs data.root: a folder with the CIFAR-10 python batches")
        return Cifar10(root, seed, size)
    raise ValueError(f"unknown dataset {name!r}; known datasets: {', '.join(DATASET_NAMES)}")
