"""AlexNet, single-tower (Krizhevsky 2014, "One weird trick...": 64/192/384/256/256 filters).

This is the AlexNet PyTorch systems train, and the one Stanza measures:
61,100,840 parameters (Stanza Tables 1/5: 61.1M), of which 2,469,696 in the 5
CONV layers and 58,631,144 in the 3 FC layers (Stanza Table 2: 2.47E+06 /
5.86E+07). The last pooling layer emits 256x6x6 = 9216 activations per sample
(Stanza §3.2), which is what a CONV worker sends to an FC worker.

SSD-SGD (§5) also trains AlexNet; it gives no count.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import dropout_or_identity
from synclab.models.spec import InputSpec, image_spec, positive_int, probability

IMAGE_SIZE = 224


class AlexNet(nn.Module):
    def __init__(self, num_classes: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, 11, stride=4, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
            nn.Conv2d(64, 192, 5, padding=2), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
            nn.Conv2d(192, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, 3, padding=1), nn.ReLU(inplace=True), nn.MaxPool2d(3, stride=2),
        )
        self.classifier = nn.Sequential(
            dropout_or_identity(dropout), nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True),
            dropout_or_identity(dropout), nn.Linear(4096, 4096), nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def alexnet(*, num_classes: int = 1000, dropout: float = 0.0) -> AlexNet:
    return AlexNet(positive_int("num_classes", num_classes), probability("dropout", dropout))


def alexnet_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
