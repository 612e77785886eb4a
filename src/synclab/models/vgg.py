"""VGG-11, VGG-16 and VGG-19 (Simonyan & Zisserman 2015, Table 1: configurations A, D, E).

Counts for ImageNet (224x224, 1000 classes): VGG-16 138,357,544 and VGG-19
143,667,240 (Stanza Tables 1/5: 138M, 143M; Stanza Table 2 splits VGG-16 into
1.47E+07 CONV and 1.24E+08 FC parameters; P3 §3: VGG-19's first FC layer holds
71.5 % of all parameters). VGG-11 is trained by SSD-SGD (§5), which gives no
count: 132,863,336, the standard configuration A (paper Table 2: 133M).

``image_size`` sets the input (a multiple of 32); the first FC layer takes
512 * (image_size/32)^2 features. ``vgg16`` with ``image_size=32,
num_classes=10`` is the CIFAR-10 VGG-16 of Stanza Table 5 (33.6M): the same
CONV layers and FC 512 -> 4096 -> 4096 -> 10.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import dropout_or_identity
from synclab.models.spec import InputSpec, ModelOptionError, image_spec, positive_int, probability

POOL = "M"
CONFIGS: dict[str, tuple[int | str, ...]] = {
    "A": (64, POOL, 128, POOL, 256, 256, POOL, 512, 512, POOL, 512, 512, POOL),
    "D": (64, 64, POOL, 128, 128, POOL, 256, 256, 256, POOL, 512, 512, 512, POOL, 512, 512, 512, POOL),
    "E": (64, 64, POOL, 128, 128, POOL, 256, 256, 256, 256, POOL, 512, 512, 512, 512, POOL,
          512, 512, 512, 512, POOL),
}


class VGG(nn.Module):
    def __init__(self, config: tuple[int | str, ...], num_classes: int, image_size: int, dropout: float):
        super().__init__()
        layers: list[nn.Module] = []
        channels = 3
        for v in config:
            if v == POOL:
                layers.append(nn.MaxPool2d(2))
            else:
                layers += [nn.Conv2d(channels, v, 3, padding=1), nn.ReLU(inplace=True)]
                channels = v
        self.features = nn.Sequential(*layers)
        side = image_size // 32
        self.classifier = nn.Sequential(
            nn.Linear(channels * side * side, 4096), nn.ReLU(inplace=True), dropout_or_identity(dropout),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), dropout_or_identity(dropout),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(torch.flatten(self.features(x), 1))


def _image_size(value: object) -> int:
    size = positive_int("image_size", value)
    if size % 32:
        raise ModelOptionError(f"model option 'image_size' must be a multiple of 32 (five 2x2 poolings), got {size}")
    return size


def _vgg(config: str, num_classes: int, image_size: int, dropout: float) -> VGG:
    return VGG(CONFIGS[config], positive_int("num_classes", num_classes), _image_size(image_size),
               probability("dropout", dropout))


def vgg11(*, num_classes: int = 1000, image_size: int = 224, dropout: float = 0.0) -> VGG:
    """Configuration A: 8 conv + 3 FC layers."""
    return _vgg("A", num_classes, image_size, dropout)


def vgg16(*, num_classes: int = 1000, image_size: int = 224, dropout: float = 0.0) -> VGG:
    """Configuration D: 13 conv + 3 FC layers."""
    return _vgg("D", num_classes, image_size, dropout)


def vgg19(*, num_classes: int = 1000, image_size: int = 224, dropout: float = 0.0) -> VGG:
    """Configuration E: 16 conv + 3 FC layers."""
    return _vgg("E", num_classes, image_size, dropout)


def vgg_input(*, num_classes: int, image_size: int, **_) -> InputSpec:
    return image_spec(_image_size(image_size), num_classes)
