"""Small building blocks shared by the zoo models."""

from __future__ import annotations

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
