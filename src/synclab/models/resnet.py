"""ResNet-50 and ResNet-152 for ImageNet (He et al. 2016, Table 1: bottleneck blocks).

MG-WFBP Table 4 trains both (~25.5M params / 161 tensors and ~60.1M / 467
tensors); Stanza Tables 1 and 5 report ResNet-152 at 60.2M. The layout is the
one PyTorch-based systems use ("ResNet v1.5": the stride sits on the 3x3 conv
of a bottleneck; a 1x1 conv + BN projection where the shape changes), so the
tensor count matches MG-WFBP's 161/467 exactly.

``features`` ends with global average pooling; ``classifier`` is the single FC
layer. Stanza (Fig. 6) trains ResNet-152 split there.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.spec import InputSpec, image_spec, positive_int

IMAGE_SIZE = 224
EXPANSION = 4


class Bottleneck(nn.Module):
    def __init__(self, in_channels: int, width: int, stride: int):
        super().__init__()
        out_channels = width * EXPANSION
        self.conv1 = nn.Conv2d(in_channels, width, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, 3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.shortcut: nn.Module = nn.Identity()
        if stride != 1 or in_channels != out_channels:
            self.shortcut = nn.Sequential(nn.Conv2d(in_channels, out_channels, 1, stride=stride, bias=False),
                                          nn.BatchNorm2d(out_channels))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))
        return self.relu(out + self.shortcut(x))


class ResNet(nn.Module):
    def __init__(self, blocks: tuple[int, int, int, int], num_classes: int):
        super().__init__()
        layers: list[nn.Module] = [
            nn.Conv2d(3, 64, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, stride=2, padding=1),
        ]
        in_channels = 64
        for stage, n in enumerate(blocks):
            width = 64 * 2 ** stage
            for i in range(n):
                layers.append(Bottleneck(in_channels, width, stride=2 if i == 0 and stage > 0 else 1))
                in_channels = width * EXPANSION
        layers.append(nn.AdaptiveAvgPool2d(1))
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(in_channels, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def resnet50(*, num_classes: int = 1000) -> ResNet:
    """25,557,032 parameters, 161 tensors (MG-WFBP Table 4: ~25.5M, 161)."""
    return ResNet((3, 4, 6, 3), positive_int("num_classes", num_classes))


def resnet152(*, num_classes: int = 1000) -> ResNet:
    """60,192,808 parameters, 467 tensors (MG-WFBP Table 4: ~60.1M, 467; Stanza Table 1: 60.2M)."""
    return ResNet((3, 8, 36, 3), positive_int("num_classes", num_classes))


def resnet_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
