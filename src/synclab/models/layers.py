"""Small building blocks shared by the zoo models."""

from __future__ import annotations

import torch
from torch import nn


class ConvBN(nn.Sequential):
    """Convolution (no bias) + BatchNorm + ReLU: the unit of GoogLeNet, Inception-v3/v4.

    ``eps=1e-3`` as in the TensorFlow-trained Inception models that PyTorch's reference
    implementations follow; it changes no parameter count.
    """

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0):
        super().__init__(
            nn.Conv2d(in_channels, out_channels, kernel_size, stride=stride, padding=padding, bias=False),
            nn.BatchNorm2d(out_channels, eps=1e-3),
            nn.ReLU(inplace=True),
        )


def dropout_or_identity(p: float) -> nn.Module:
    """Dropout where the reference architecture has it, an identity when ``p == 0``.

    Zoo models default to ``p = 0``: dropout draws random numbers, which would make a
    distributed run differ from its single-process reference on the global batch.
    """
    return nn.Dropout(p) if p > 0 else nn.Identity()


class Branches(nn.Module):
    """Runs every child on the same input and concatenates the outputs along channels (an Inception block)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.children()], 1)


class SplitPair(Branches):
    """A 1x3 and a 3x1 conv on the same input, concatenated (Inception-v3 Fig. 7's expanded filter bank)."""

    def __init__(self, in_ch: int, out_ch: int):
        super().__init__()
        self.conv1x3 = ConvBN(in_ch, out_ch, (1, 3), padding=(0, 1))
        self.conv3x1 = ConvBN(in_ch, out_ch, (3, 1), padding=(1, 0))


class AuxTap(nn.Module):
    """An auxiliary classifier placed inside ``features``: identity on the main path.

    In training mode it also runs ``head`` on its input and keeps the logits until the
    model's forward collects them with :meth:`pop`; in eval mode it does nothing. This
    keeps the head in forward order and every parameter under ``features``/``classifier``.
    """

    def __init__(self, head: nn.Module):
        super().__init__()
        self.head = head
        self.logits: torch.Tensor | None = None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            self.logits = self.head(x)
        return x

    def pop(self) -> torch.Tensor:
        logits, self.logits = self.logits, None
        if logits is None:
            raise RuntimeError("auxiliary logits requested, but the head did not run in this forward pass")
        return logits


def add_aux_logits(model: nn.Module, out: torch.Tensor, weight: float) -> torch.Tensor:
    """``out + weight * aux`` for every :class:`AuxTap` of ``model`` in training mode, else ``out``."""
    if not model.training:
        return out
    for tap in model.modules():
        if isinstance(tap, AuxTap):
            out = out + weight * tap.pop()
    return out
