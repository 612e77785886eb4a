"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture", Table 1 / Figs. 5-7).

Stanza Tables 1 and 5 and P3 (§5, Figs. 5 and 7) train it; Stanza reports 27M
parameters, which is the network *with* its auxiliary classifier:
27,161,264 (23,834,568 without). Module names follow the paper's figures: A
blocks are Fig. 5 (35x35), C blocks Fig. 6 (17x17, factorised 7x7), E blocks
Fig. 7 (8x8, expanded filter banks); B and D are the grid reductions.

The auxiliary head branches off the 17x17 grid after the last C block and is
registered there, in forward order. In training mode the forward returns
``main + 0.4 * aux`` (0.4, the auxiliary-loss weight PyTorch's reference
recipe uses) so every parameter receives a gradient through the engine's one
output tensor; in eval mode, the main logits. Input is 299x299.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import ConvBN, dropout_or_identity
from synclab.models.spec import InputSpec, flag, image_spec, positive_int, probability

IMAGE_SIZE = 299
AUX_WEIGHT = 0.4


def _avgpool_proj(in_ch: int, out_ch: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), ConvBN(in_ch, out_ch, 1))


class _Branches(nn.Module):
    """Runs every child on the same input and concatenates along channels."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.children()], 1)


class BlockA(_Branches):
    def __init__(self, in_ch: int, pool_features: int):
        super().__init__()
        self.branch1x1 = ConvBN(in_ch, 64, 1)
        self.branch5x5 = nn.Sequential(ConvBN(in_ch, 48, 1), ConvBN(48, 64, 5, padding=2))
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1),
                                          ConvBN(96, 96, 3, padding=1))
        self.branch_pool = _avgpool_proj(in_ch, pool_features)


class BlockB(_Branches):
    """35x35 -> 17x17 reduction."""

    def __init__(self, in_ch: int):
        super().__init__()
        self.branch3x3 = ConvBN(in_ch, 384, 3, stride=2)
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1),
                                          ConvBN(96, 96, 3, stride=2))
        self.branch_pool = nn.MaxPool2d(3, stride=2)


class BlockC(_Branches):
    def __init__(self, in_ch: int, c7: int):
        super().__init__()
        self.branch1x1 = ConvBN(in_ch, 192, 1)
        self.branch7x7 = nn.Sequential(ConvBN(in_ch, c7, 1), ConvBN(c7, c7, (1, 7), padding=(0, 3)),
                                       ConvBN(c7, 192, (7, 1), padding=(3, 0)))
        self.branch7x7dbl = nn.Sequential(
            ConvBN(in_ch, c7, 1), ConvBN(c7, c7, (7, 1), padding=(3, 0)), ConvBN(c7, c7, (1, 7), padding=(0, 3)),
            ConvBN(c7, c7, (7, 1), padding=(3, 0)), ConvBN(c7, 192, (1, 7), padding=(0, 3)),
        )
        self.branch_pool = _avgpool_proj(in_ch, 192)


class BlockD(_Branches):
    """17x17 -> 8x8 reduction."""

    def __init__(self, in_ch: int):
        super().__init__()
        self.branch3x3 = nn.Sequential(ConvBN(in_ch, 192, 1), ConvBN(192, 320, 3, stride=2))
        self.branch7x7x3 = nn.Sequential(
            ConvBN(in_ch, 192, 1), ConvBN(192, 192, (1, 7), padding=(0, 3)),
            ConvBN(192, 192, (7, 1), padding=(3, 0)), ConvBN(192, 192, 3, stride=2),
        )
        self.branch_pool = nn.MaxPool2d(3, stride=2)


class _SplitPair(nn.Module):
    """A 1x3 and a 3x1 conv on the same input, concatenated (Fig. 7's expanded outputs)."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.a = ConvBN(in_ch, out_ch, (1, 3), padding=(0, 1))
        self.b = ConvBN(in_ch, out_ch, (3, 1), padding=(1, 0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.a(x), self.b(x)], 1)


class BlockE(_Branches):
    def __init__(self, in_ch: int):
        super().__init__()
        self.branch1x1 = ConvBN(in_ch, 320, 1)
        self.branch3x3 = nn.Sequential(ConvBN(in_ch, 384, 1), _SplitPair(384, 384))
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 448, 1), ConvBN(448, 384, 3, padding=1),
                                          _SplitPair(384, 384))
        self.branch_pool = _avgpool_proj(in_ch, 192)


class AuxHead(nn.Module):
    def __init__(self, in_ch: int, num_classes: int):
        super().__init__()
        self.body = nn.Sequential(nn.AvgPool2d(5, stride=3), ConvBN(in_ch, 128, 1), ConvBN(128, 768, 5),
                                  nn.AdaptiveAvgPool2d(1), nn.Flatten(1))
        self.fc = nn.Linear(768, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.body(x))


class InceptionV3(nn.Module):
    def __init__(self, num_classes: int, aux_logits: bool, dropout: float):
        super().__init__()
        self.stem = nn.Sequential(
            ConvBN(3, 32, 3, stride=2), ConvBN(32, 32, 3), ConvBN(32, 64, 3, padding=1), nn.MaxPool2d(3, stride=2),
            ConvBN(64, 80, 1), ConvBN(80, 192, 3), nn.MaxPool2d(3, stride=2),
        )
        self.grid35 = nn.Sequential(BlockA(192, 32), BlockA(256, 64), BlockA(288, 64))
        self.grid17 = nn.Sequential(BlockB(288), BlockC(768, 128), BlockC(768, 160), BlockC(768, 160),
                                    BlockC(768, 192))
        self.aux = AuxHead(768, num_classes) if aux_logits else None
        self.grid8 = nn.Sequential(BlockD(768), BlockE(1280), BlockE(2048), nn.AdaptiveAvgPool2d(1),
                                   nn.Flatten(1), dropout_or_identity(dropout))
        self.classifier = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.grid17(self.grid35(self.stem(x)))
        aux = self.aux(x) if self.aux is not None and self.training else None
        out = self.classifier(self.grid8(x))
        return out if aux is None else out + AUX_WEIGHT * aux


def inception_v3(*, num_classes: int = 1000, aux_logits: bool = True, dropout: float = 0.0) -> InceptionV3:
    """27,161,264 parameters with the auxiliary head, 23,834,568 without."""
    return InceptionV3(positive_int("num_classes", num_classes), flag("aux_logits", aux_logits),
                       probability("dropout", dropout))


def inception_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
