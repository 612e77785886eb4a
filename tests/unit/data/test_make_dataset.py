"""make_dataset: names, the CIFAR-10 error path (tests never download anything)."""

from __future__ import annotations

import pytest

from synclab.data import SyntheticClassification, make_dataset
from synclab.models import InputSpec, model_input_spec

CIFAR = InputSpec("image", (3, 32, 32), 10)


def test_synthetic_for_a_model():
    ds = make_dataset("synthetic", model_input_spec("smallcnn"), seed=0, size=1000)
    assert isinstance(ds, SyntheticClassification) and len(ds) == 1000
    assert ds.batch(0, 0, 1, 2)[0].shape == (2, 3, 32, 32)


def test_unknown_dataset_is_named():
    with pytest.raises(ValueError, match=r"'imagenet'.*synthetic, cifar10"):
        make_dataset("imagenet", CIFAR, seed=0)


def test_synthetic_refuses_a_root():
    with pytest.raises(ValueError, match="root"):
        make_dataset("synthetic", CIFAR, seed=0, root="/data")


def test_cifar10_missing_folder_names_the_path(tmp_path):
    where = tmp_path / "nowhere"
    with pytest.raises(FileNotFoundError, match="nowhere") as err:
        make_dataset("cifar10", CIFAR, seed=0, root=str(where))
    assert "data_batch_1" in str(err.value)


def test_cifar10_without_root():
    with pytest.raises(FileNotFoundError, match="root"):
        make_dataset("cifar10", CIFAR, seed=0)


def test_cifar10_needs_a_cifar_shaped_model(tmp_path):
    with pytest.raises(ValueError, match="3x32x32"):
        make_dataset("cifar10", model_input_spec("resnet50"), seed=0, root=str(tmp_path))


def test_cifar10_reads_the_python_pickles(tmp_path):
    # A fabricated 50-image stand-in in the real format: nothing is downloaded.
    import pickle

    import numpy as np
    import torch

    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    rng = np.random.default_rng(0)
    for i in range(1, 6):
        batch = {b"data": rng.integers(0, 256, (10, 3072), dtype=np.uint8), b"labels": list(range(10))}
        (folder / f"data_batch_{i}").write_bytes(pickle.dumps(batch))
    ds = make_dataset("cifar10", CIFAR, seed=0, root=str(tmp_path), size=50)
    x, y = ds.batch(1, 0, 1, 12)
    assert x.shape == (12, 3, 32, 32) and x.dtype == torch.float32 and y.dtype == torch.int64
    parts = [ds.batch(1, r, 3, 4) for r in range(3)]
    assert torch.equal(x, torch.cat([p[0] for p in parts])) and torch.equal(y, torch.cat([p[1] for p in parts]))
    with pytest.raises(ValueError, match="size 51"):
        make_dataset("cifar10", CIFAR, seed=0, root=str(tmp_path), size=51)
