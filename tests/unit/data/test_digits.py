"""digits: scikit-learn's real 8x8 images, a fixed stratified split, the batch contract of every dataset."""

from __future__ import annotations

import pytest
import torch

from synclab.data import Digits, make_dataset
from synclab.data.digits import SPEC, TEST_SIZE, TOTAL, TRAIN_SIZE, load_images, stratified_split
from synclab.models import model_input_spec

MLP64 = {"input_dim": 64, "num_classes": 10}


@pytest.fixture(scope="module")
def digits() -> Digits:
    return make_dataset("digits", model_input_spec("mlp", **MLP64), seed=3)


def test_split_sizes_and_disjoint(digits):
    assert (TRAIN_SIZE, TEST_SIZE) == (1437, 360) and len(digits) == TRAIN_SIZE
    x, y = digits.test_split()
    assert x.shape == (360, 64) and y.shape == (360,) and x.dtype == torch.float32 and y.dtype == torch.int64
    _, labels = load_images()
    train, test = stratified_split(labels, TEST_SIZE, 0)
    assert len(train) == TRAIN_SIZE and len(test) == TEST_SIZE
    assert torch.equal(torch.sort(torch.cat([train, test])).values, torch.arange(TOTAL))


def test_split_is_stratified(digits):
    _, y_all = load_images()
    test_counts = torch.bincount(digits.test_split()[1], minlength=10)
    expected = torch.bincount(y_all, minlength=10).double() * TEST_SIZE / TOTAL
    assert (test_counts.double() - expected).abs().max() < 1


def test_features_scaled_to_unit_interval(digits):
    x, _ = digits.batch(0, 0, 1, 256)
    assert x.shape == (256, 64) and x.min() >= 0 and x.max() <= 1 and x.max() == 1


def test_split_fixed_across_run_seeds_order_is_not():
    other = Digits(seed=4)
    again = Digits(seed=3)
    base = Digits(seed=3)
    assert torch.equal(other.test_split()[0], base.test_split()[0])
    assert torch.equal(other.test_split()[1], base.test_split()[1])
    assert torch.equal(again.batch(5, 0, 1, 64)[0], base.batch(5, 0, 1, 64)[0])  # deterministic
    assert not torch.equal(other.batch(0, 0, 1, 64)[1], base.batch(0, 0, 1, 64)[1])


@pytest.mark.parametrize("world", [1, 3, 4])
def test_distributed_slices_equal_the_global_batch(digits, world):
    for iteration in (0, 11, 12):  # 12 * 128 > 1437: a batch across an epoch boundary
        gx, gy = digits.batch(iteration, 0, 1, world * 32)
        parts = [digits.batch(iteration, r, world, 32) for r in range(world)]
        assert torch.equal(gx, torch.cat([p[0] for p in parts])) and torch.equal(gy, torch.cat([p[1] for p in parts]))


def test_wrong_model_input_is_refused():
    with pytest.raises(ValueError, match="input_dim: 64"):
        make_dataset("digits", model_input_spec("smallcnn"), seed=0)
    with pytest.raises(ValueError, match="input_dim: 64"):
        make_dataset("digits", model_input_spec("mlp", input_dim=64, num_classes=7), seed=0)


def test_size_and_root():
    assert len(make_dataset("digits", SPEC, seed=0, size=100)) == 100
    with pytest.raises(ValueError, match="1437"):
        make_dataset("digits", SPEC, seed=0, size=1438)
    with pytest.raises(ValueError, match="root"):
        make_dataset("digits", SPEC, seed=0, root="/data")


def test_stratified_split_rounds_to_the_requested_size():
    labels = torch.tensor([0] * 7 + [1] * 5 + [2] * 3)
    train, test = stratified_split(labels, 4, seed=1)
    assert len(test) == 4 and len(train) == 11
    assert torch.bincount(labels[test], minlength=3).tolist() == [2, 1, 1]
    with pytest.raises(ValueError):
        stratified_split(labels, 15, seed=1)
