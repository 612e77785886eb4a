"""GoogLeNet / Inception-v1 (Szegedy et al. 2015, Table 1), with its two auxiliary classifiers.

MG-WFBP Table 4 lists GoogLeNet at ~13M parameters: that is the network *with*
its auxiliary classifiers (about 6.6M without). The layout is the one PyTorch
systems train (every conv followed by BatchNorm, no LRN), including its one
departure from the paper: the "5x5" branch of each Inception module uses a
3x3 conv. That gives 13,004,888 parameters; with true 5x5 convs it would be
13,385,816, 3 % above what MG-WFBP reports. It has 187 parameter tensors with
its auxiliary heads, against Table 4's 59 (see :func:`googlenet_mgwfbp`).

Auxiliary heads (paper §5) sit after inception 4a and 4d, inside ``features``
in that forward position (:class:`~synclab.models.layers.AuxTap`). The engine
trains a model through one output tensor, so in training mode the forward
returns ``main + 0.3 * (aux1 + aux2)`` (0.3 is the paper's discount weight):
every parameter gets a gradient each iteration, which gradient-driven
synchronization needs. In eval mode it returns the main logits only.
``aux_logits=False`` drops the heads; then the model is exactly
``classifier(features(x))``, as the Stanza strategy requires (with the heads,
Stanza's CONV workers would compute aux logits nobody consumes).

:func:`googlenet_mgwfbp` is the zoo variant for MG-WFBP's GoogleNet (Table 4: 59 tensors): no BatchNorm,
no auxiliary heads, every conv weight-only and followed by ReLU. Table 4 counts parameter tensors (its
ResNet-50 161 = 53 convs + 53 x 2 BN + the classifier's weight and bias), and 59 is exactly what this
network has under that count: 57 conv weights + the classifier's 2. It has 6,610,344 parameters, half
Table 4's ~13M: no GoogLeNet has both 59 tensors and ~13M (the heads bring the 13M and 10 more tensors),
so the variant keeps the tensor count, which decides how many start-ups a merge plan saves, and says so.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import AuxTap, Branches, ConvBN, add_aux_logits, dropout_or_identity
from synclab.models.spec import InputSpec, flag, image_spec, positive_int, probability

IMAGE_SIZE = 224
AUX_WEIGHT = 0.3  # Szegedy et al. §5: auxiliary losses are discounted by 0.3


class Inception(Branches):
    """Four parallel branches: 1x1 | 1x1-3x3 | 1x1-3x3 ("5x5") | maxpool-1x1, concatenated."""

    def __init__(self, in_ch: int, ch1x1: int, ch3x3red: int, ch3x3: int, ch5x5red: int, ch5x5: int,
                 pool_proj: int, unit: type[nn.Sequential] = ConvBN):
        super().__init__()
        self.branch1 = unit(in_ch, ch1x1, 1)
        self.branch2 = nn.Sequential(unit(in_ch, ch3x3red, 1), unit(ch3x3red, ch3x3, 3, padding=1))
        self.branch3 = nn.Sequential(unit(in_ch, ch5x5red, 1), unit(ch5x5red, ch5x5, 3, padding=1))
        self.branch4 = nn.Sequential(nn.MaxPool2d(3, stride=1, padding=1, ceil_mode=True),
                                     unit(in_ch, pool_proj, 1))


class ConvReLU(nn.Sequential):
    """Weight-only convolution + ReLU: :func:`googlenet_mgwfbp`'s unit (no BatchNorm, no bias)."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False),
            nn.ReLU(inplace=True),
        )


class AuxHead(nn.Module):
    """avgpool to 4x4, 1x1 conv (128), FC 1024, dropout, FC classes (paper §5)."""

    def __init__(self, in_ch: int, num_classes: int, dropout: float):
        super().__init__()
        self.pool = nn.AdaptiveAvgPool2d(4)
        self.conv = ConvBN(in_ch, 128, 1)
        self.fc1 = nn.Linear(128 * 4 * 4, 1024)
        self.relu = nn.ReLU(inplace=True)
        self.drop = dropout_or_identity(dropout)
        self.fc2 = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.flatten(self.conv(self.pool(x)), 1)
        return self.fc2(self.drop(self.relu(self.fc1(x))))


class GoogLeNet(nn.Module):
    def __init__(self, num_classes: int, aux_logits: bool, dropout: float, unit: type[nn.Sequential] = ConvBN):
        super().__init__()

        def tap(in_ch: int) -> list[nn.Module]:
            return [AuxTap(AuxHead(in_ch, num_classes, dropout))] if aux_logits else []

        def inception(*channels: int) -> Inception:
            return Inception(*channels, unit=unit)

        self.features = nn.Sequential(
            unit(3, 64, 7, stride=2, padding=3), nn.MaxPool2d(3, stride=2, ceil_mode=True),
            unit(64, 64, 1), unit(64, 192, 3, padding=1), nn.MaxPool2d(3, stride=2, ceil_mode=True),
            inception(192, 64, 96, 128, 16, 32, 32), inception(256, 128, 128, 192, 32, 96, 64),
            nn.MaxPool2d(3, stride=2, ceil_mode=True),
            inception(480, 192, 96, 208, 16, 48, 64), *tap(512),
            inception(512, 160, 112, 224, 24, 64, 64), inception(512, 128, 128, 256, 24, 64, 64),
            inception(512, 112, 144, 288, 32, 64, 64), *tap(528),
            inception(528, 256, 160, 320, 32, 128, 128), nn.MaxPool2d(2, stride=2, ceil_mode=True),
            inception(832, 256, 160, 320, 32, 128, 128), inception(832, 384, 192, 384, 48, 128, 128),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(1), dropout_or_identity(dropout),
        )
        self.classifier = nn.Linear(1024, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return add_aux_logits(self, self.classifier(self.features(x)), AUX_WEIGHT)


def googlenet(*, num_classes: int = 1000, aux_logits: bool = True, dropout: float = 0.0) -> GoogLeNet:
    """13,004,888 parameters with the auxiliary heads, 6,624,904 without."""
    return GoogLeNet(positive_int("num_classes", num_classes), flag("aux_logits", aux_logits),
                     probability("dropout", dropout))


def googlenet_mgwfbp(*, num_classes: int = 1000, dropout: float = 0.0) -> GoogLeNet:
    """MG-WFBP Table 4's GoogleNet as a tensor list: 59 tensors (57 weight-only convs, the classifier's
    weight and bias), no BatchNorm, no auxiliary heads; 6,610,344 parameters (module docstring)."""
    return GoogLeNet(positive_int("num_classes", num_classes), False, probability("dropout", dropout),
                     unit=ConvReLU)


def googlenet_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
