"""``smallcnn``: the runtime's default model — a few CONV layers, then a few FC layers.

Sized so that one worker on a laptop core runs an iteration in tens of
milliseconds while the parameter profile still looks like the CNNs the papers
train: the FC part holds most of the parameters (~86 %), the CONV part most of
the computation (Stanza §3.1, Table 2). Input 3x32x32 (CIFAR-10 sized).

No BatchNorm and no dropout, on purpose: a data-parallel run over W workers
must be bit-for-bit comparable with one process on the global batch, and both
layers make a sample's output depend on its batch-mates or on random draws.
Attributes are registered in forward order (P3 §4 derives priorities from it),
and ``features``/``classifier`` mark the CONV/FC boundary Stanza splits at.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.spec import InputSpec, image_spec, positive_int

IMAGE_SIZE = 32


class SmallCNN(nn.Module):
    """3 conv(3x3)+ReLU+maxpool stages (64, 128, 256 channels), then FC 4096 -> 512 -> 256 -> classes."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),     # 16x16
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),   # 8x8
            nn.Conv2d(128, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(2),  # 4x4
        )
        self.classifier = nn.Sequential(
            nn.Linear(256 * 4 * 4, 512), nn.ReLU(inplace=True),
            nn.Linear(512, 256), nn.ReLU(inplace=True),
            nn.Linear(256, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def smallcnn(*, num_classes: int = 10) -> SmallCNN:
    """2,602,378 parameters with 10 classes: 370,816 in the CONV part, 2,231,562 in the FC part."""
    return SmallCNN(positive_int("num_classes", num_classes))


def smallcnn_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
