"""Inception-v4 (Szegedy et al. 2017, "Inception-v4, Inception-ResNet...", Figs. 3-9).

MG-WFBP Table 4 trains it: ~42.6M parameters in 449 tensors. Every conv is
followed by BatchNorm (conv without bias: 3 tensors per conv, 149 convs, plus
the FC layer = 449), giving 42,679,816 parameters with 1000 classes. Blocks
are named after the paper's figures: stem (Fig. 3), A (Fig. 4), reduction A
(Fig. 7, k=192 l=224 m=256 n=384), B (Fig. 5), reduction B (Fig. 8), C (Fig. 6).
Input is 299x299. ``features`` ends with global average pooling;
``classifier`` is the single FC layer.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import Branches, ConvBN, SplitPair, dropout_or_identity
from synclab.models.spec import InputSpec, image_spec, positive_int, probability

IMAGE_SIZE = 299


def _avgpool_proj(in_ch: int, out_ch: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1, count_include_pad=False), ConvBN(in_ch, out_ch, 1))


def _conv_1x7(in_ch: int, out_ch: int) -> ConvBN:
    return ConvBN(in_ch, out_ch, (1, 7), padding=(0, 3))


def _conv_7x1(in_ch: int, out_ch: int) -> ConvBN:
    return ConvBN(in_ch, out_ch, (7, 1), padding=(3, 0))


class StemPool(Branches):
    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.pool = nn.MaxPool2d(3, stride=2)
        self.conv = ConvBN(in_ch, out_ch, 3, stride=2)


class StemFactorised(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = nn.Sequential(ConvBN(160, 64, 1), ConvBN(64, 96, 3))
        self.branch1 = nn.Sequential(ConvBN(160, 64, 1), _conv_1x7(64, 64), _conv_7x1(64, 64), ConvBN(64, 96, 3))


class StemConvPool(Branches):
    def __init__(self):
        super().__init__()
        self.conv = ConvBN(192, 192, 3, stride=2)
        self.pool = nn.MaxPool2d(3, stride=2)


class BlockA(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = ConvBN(384, 96, 1)
        self.branch1 = nn.Sequential(ConvBN(384, 64, 1), ConvBN(64, 96, 3, padding=1))
        self.branch2 = nn.Sequential(ConvBN(384, 64, 1), ConvBN(64, 96, 3, padding=1), ConvBN(96, 96, 3, padding=1))
        self.branch3 = _avgpool_proj(384, 96)


class ReductionA(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = ConvBN(384, 384, 3, stride=2)
        self.branch1 = nn.Sequential(ConvBN(384, 192, 1), ConvBN(192, 224, 3, padding=1),
                                     ConvBN(224, 256, 3, stride=2))
        self.branch2 = nn.MaxPool2d(3, stride=2)


class BlockB(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = ConvBN(1024, 384, 1)
        self.branch1 = nn.Sequential(ConvBN(1024, 192, 1), _conv_1x7(192, 224), _conv_7x1(224, 256))
        self.branch2 = nn.Sequential(ConvBN(1024, 192, 1), _conv_7x1(192, 192), _conv_1x7(192, 224),
                                     _conv_7x1(224, 224), _conv_1x7(224, 256))
        self.branch3 = _avgpool_proj(1024, 128)


class ReductionB(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = nn.Sequential(ConvBN(1024, 192, 1), ConvBN(192, 192, 3, stride=2))
        self.branch1 = nn.Sequential(ConvBN(1024, 256, 1), _conv_1x7(256, 256), _conv_7x1(256, 320),
                                     ConvBN(320, 320, 3, stride=2))
        self.branch2 = nn.MaxPool2d(3, stride=2)


class BlockC(Branches):
    def __init__(self):
        super().__init__()
        self.branch0 = ConvBN(1536, 256, 1)
        self.branch1 = nn.Sequential(ConvBN(1536, 384, 1), SplitPair(384, 256))
        self.branch2 = nn.Sequential(ConvBN(1536, 384, 1), ConvBN(384, 448, (3, 1), padding=(1, 0)),
                                     ConvBN(448, 512, (1, 3), padding=(0, 1)), SplitPair(512, 256))
        self.branch3 = _avgpool_proj(1536, 256)


class InceptionV4(nn.Module):
    def __init__(self, num_classes: int, dropout: float):
        super().__init__()
        self.features = nn.Sequential(
            ConvBN(3, 32, 3, stride=2), ConvBN(32, 32, 3), ConvBN(32, 64, 3, padding=1),
            StemPool(64, 96), StemFactorised(), StemConvPool(),
            *(BlockA() for _ in range(4)), ReductionA(),
            *(BlockB() for _ in range(7)), ReductionB(),
            *(BlockC() for _ in range(3)),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(1), dropout_or_identity(dropout),
        )
        self.classifier = nn.Linear(1536, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x))


def inception_v4(*, num_classes: int = 1000, dropout: float = 0.0) -> InceptionV4:
    """42,679,816 parameters, 449 tensors."""
    return InceptionV4(positive_int("num_classes", num_classes), probability("dropout", dropout))


def inception_v4_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
