"""ResNet-20 and ResNet-110 for CIFAR-10 (He et al. 2016, §4.2).

SSD-SGD (§5, Table 2) trains ResNet-20 and P3 (§5.5, Fig. 11) ResNet-110 on
CIFAR-10; neither paper gives a parameter count, so the reference is He et
al.'s Table 6: 0.27M and 1.7M. That count needs the paper's own design: a
3x3 conv with 16 filters, three stages of n basic blocks (16, 32, 64 filters,
6n+2 layers in all) and parameter-free "option A" shortcuts (subsample by 2,
pad the new channels with zeros).

``features`` ends with global average pooling; ``classifier`` is the single FC layer.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from synclab.models.spec import InputSpec, image_spec, positive_int

IMAGE_SIZE = 32


class BasicBlock(nn.Module):
    def __init__(self, in_channels: int, out_channels: int, stride: int):
        super().__init__()
        self.conv1 = nn.Conv2d(in_channels, out_channels, 3, stride=stride, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(out_channels)
        self.conv2 = nn.Conv2d(out_channels, out_channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.stride = stride
        self.extra_channels = out_channels - in_channels

    def shortcut(self, x: torch.Tensor) -> torch.Tensor:
        # Option A (He et al. §4.2): identity, subsampled and zero-padded when the shape changes.
        if self.stride != 1:
            x = x[:, :, ::self.stride, ::self.stride]
        if self.extra_channels:
            x = F.pad(x, (0, 0, 0, 0, 0, self.extra_channels))
        return x

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + self.shortcut(x))


class CifarResNet(nn.Module):
    def __init__(self, depth: int, num_classes: int):
        super().__init__()
        if (depth - 2) % 6:
            raise ValueError(f"CIFAR ResNet depth must be 6n+2, got {depth}")
        n = (depth - 2) // 6
        layers: list[nn.Module] = [nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                   nn.ReLU(inplace=True)]
        in_channels = 16
        for stage in range(3):
            out_channels = 16 * 2 ** stage
            for i in range(n):
                layers.append(BasicBlock(in_channels, out_channels, stride=2 if i == 0 and stage > 0 else 1))
                in_channels = out_channels
        layers.append(nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(in_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def resnet20(*, num_classes: int = 10) -> CifarResNet:
    """269,722 parameters (He et al. Table 6: 0.27M)."""
    return CifarResNet(20, positive_int("num_classes", num_classes))


def resnet110(*, num_classes: int = 10) -> CifarResNet:
    """1,727,962 parameters (He et al. Table 6: 1.7M)."""
    return CifarResNet(110, positive_int("num_classes", num_classes))


def resnet_cifar_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
