"""Inception-v3 (Szegedy et al. 2016, "Rethinking the Inception Architecture", Table 1 / Figs. 5-7).

Stanza Tables 1 and 5 and P3 (§5, Figs. 5 and 7) train it; Stanza reports 27M
parameters, which is the network *with* its auxiliary classifier:
27,161,264 (23,834,568 without). Module names follow the paper's figures: A
blocks are Fig. 5 (35x35), C blocks Fig. 6 (17x17, factorised 7x7), E blocks
Fig. 7 (8x8, expanded filter banks); B and D are the grid reductions.

The auxiliary head branches off the 17x17 grid after the last C block and sits
there inside ``features``, in forward order (:class:`~synclab.models.layers.AuxTap`).
In training mode the forward returns ``main + 0.4 * aux`` (0.4, the
auxiliary-loss weight PyTorch's reference recipe uses) so every parameter
receives a gradient through the engine's one output tensor; in eval mode, the
main logits. With ``aux_logits=False`` the model is exactly
``classifier(features(x))``, the form the Stanza strategy trains. Input is 299x299.
"""

from __future__ import annotations

import torch
from torch import nn

from synclab.models.layers import AuxTap, Branches, ConvBN, SplitPair, add_aux_logits, dropout_or_identity
from synclab.models.spec import InputSpec, flag, image_spec, positive_int, probability

IMAGE_SIZE = 299
AUX_WEIGHT = 0.4


def _avgpool_proj(in_ch: int, out_ch: int) -> nn.Sequential:
    return nn.Sequential(nn.AvgPool2d(3, stride=1, padding=1), ConvBN(in_ch, out_ch, 1))


class BlockA(Branches):
    def __init__(self, in_ch: int, pool_features: int):
        super().__init__()
        self.branch1x1 = ConvBN(in_ch, 64, 1)
        self.branch5x5 = nn.Sequential(ConvBN(in_ch, 48, 1), ConvBN(48, 64, 5, padding=2))
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1),
                                          ConvBN(96, 96, 3, padding=1))
        self.branch_pool = _avgpool_proj(in_ch, pool_features)


class BlockB(Branches):
    """35x35 -> 17x17 reduction."""

    def __init__(self, in_ch: int):
        super().__init__()
        self.branch3x3 = ConvBN(in_ch, 384, 3, stride=2)
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 64, 1), ConvBN(64, 96, 3, padding=1),
                                          ConvBN(96, 96, 3, stride=2))
        self.branch_pool = nn.MaxPool2d(3, stride=2)


class BlockC(Branches):
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


class BlockD(Branches):
    """17x17 -> 8x8 reduction."""

    def __init__(self, in_ch: int):
        super().__init__()
        self.branch3x3 = nn.Sequential(ConvBN(in_ch, 192, 1), ConvBN(192, 320, 3, stride=2))
        self.branch7x7x3 = nn.Sequential(
            ConvBN(in_ch, 192, 1), ConvBN(192, 192, (1, 7), padding=(0, 3)),
            ConvBN(192, 192, (7, 1), padding=(3, 0)), ConvBN(192, 192, 3, stride=2),
        )
        self.branch_pool = nn.MaxPool2d(3, stride=2)


class BlockE(Branches):
    def __init__(self, in_ch: int):
        super().__init__()
        self.branch1x1 = ConvBN(in_ch, 320, 1)
        self.branch3x3 = nn.Sequential(ConvBN(in_ch, 384, 1), SplitPair(384, 384))
        self.branch3x3dbl = nn.Sequential(ConvBN(in_ch, 448, 1), ConvBN(448, 384, 3, padding=1),
                                          SplitPair(384, 384))
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
        self.features = nn.Sequential(
            ConvBN(3, 32, 3, stride=2), ConvBN(32, 32, 3), ConvBN(32, 64, 3, padding=1), nn.MaxPool2d(3, stride=2),
            ConvBN(64, 80, 1), ConvBN(80, 192, 3), nn.MaxPool2d(3, stride=2),
            BlockA(192, 32), BlockA(256, 64), BlockA(288, 64),
            BlockB(288), BlockC(768, 128), BlockC(768, 160), BlockC(768, 160), BlockC(768, 192),
            *([AuxTap(AuxHead(768, num_classes))] if aux_logits else []),
            BlockD(768), BlockE(1280), BlockE(2048),
            nn.AdaptiveAvgPool2d(1), nn.Flatten(1), dropout_or_identity(dropout),
        )
        self.classifier = nn.Linear(2048, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return add_aux_logits(self, self.classifier(self.features(x)), AUX_WEIGHT)


def inception_v3(*, num_classes: int = 1000, aux_logits: bool = True, dropout: float = 0.0) -> InceptionV3:
    """27,161,264 parameters with the auxiliary head, 23,834,568 without."""
    return InceptionV3(positive_int("num_classes", num_classes), flag("aux_logits", aux_logits),
                       probability("dropout", dropout))


def inception_input(*, num_classes: int, **_) -> InputSpec:
    return image_spec(IMAGE_SIZE, num_classes)
