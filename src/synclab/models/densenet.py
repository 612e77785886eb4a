"""DenseNet-161 and DenseNet-201 for ImageNet (Huang et al. 2017, Table 1: DenseNet-BC).

MG-WFBP Table 4: DenseNet-161 ~28.6M parameters in 484 tensors, DenseNet-201
~20M in 604. Each dense layer is BN-ReLU-conv1x1 (4k filters)-BN-ReLU-conv3x3
(k filters) with growth rate k (48 for 161, 32 for 201); transitions halve the
channels (BN-ReLU-conv1x1-avgpool2). No conv has a bias, which is what makes
the tensor counts come out at 484 and 604.

``features`` ends with the final BN, ReLU and global average pooling;
``classifier`` is the single FC layer.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.spec import InputSpec, image_spec, positive_int

IMAGE_SIZE = 224
BOTTLENECK_WIDTH = 4  # 1x1 conv produces 4k feature maps (DenseNet-B)


class DenseLayer(nn.Module):
    def __init__(self, in_channels: int, growth: int):
        super().__init__()
        self.body = nn.Sequential(
            nn.BatchNorm2d(in_channels), nn.ReLU(inplace=True),
            nn.Conv2d(in_channels, BOTTLENECK_WIDTH * growth, 1, bias=False),
            nn.BatchNorm2d(BOTTLENECK_WIDTH * growth), nn.ReLU(inplace=True),
            nn.Conv2d(BOTTLENECK_WIDTH * growth, growth, 3, padding=1, bias=False),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([x, self.body(x)], 1)


def _transition(in_channels: int) -> nn.Sequential:
    return nn.Sequential(nn.BatchNorm2d(in_channels), nn.ReLU(inplace=True),
                         nn.Conv2d(in_channels, in_channels // 2, 1, bias=False), nn.AvgPool2d(2))


class DenseNet(nn.Module):
    def __init__(self, growth: int, blocks: tuple[int, ...], init_channels: int, num_classes: int):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, init_channels, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(init_channels),
            nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2, padding=1),
        ]
        channels = init_channels
        for b, n in enumerate(blocks):
            for _ in range(n):
                layers.append(DenseLayer(channels, growth))
                channels += growth
            if b < len(blocks) - 1:
                layers.append(_transition(channels))
                channels //= 2
        layers += [nn.BatchNorm2d(channels), nn.ReLU(inplace=True), nn.AdaptiveAvgPool2d(1)]
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def densenet161(*, num_classes: int = 1000) -> DenseNet:
    """k=48, blocks (6, 12, 36, 24), 96 initial filters: 28,681,000 parameters, 484 tensors."""
    return DenseNet(48, (6, 12, 36, 24), 96, positive_int("num_classes", num_classes))


def densenet201(*, num_classes: int = 1000) -> DenseNet:
    """k=32, blocks (6, 12, 48, 32), 64 initial filters: 20,013,928 parameters, 604 tensors."""
    return DenseNet(32, (6, 12, 48, 32), 64, positive_int("num_classes", num_classes))


def densenet_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
