"""``mlp``: fully connected layers only, on flat feature vectors.

The cheapest real model: useful for strategy tests where compute must vanish
next to communication. ``input_dim`` defaults to 256 (a 16x16 grey image, or
any 256-feature vector), not 3*32*32, so the first layer does not dwarf the
rest. No BatchNorm, no dropout (see :mod:`synclab.models.smallcnn`); it has
no CONV part, so :func:`synclab.models.conv_fc_boundary` returns ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import nn

from synclab.models.spec import InputSpec, ModelOptionError, positive_int


class MLP(nn.Module):
    def __init__(self, input_dim: int, hidden: Sequence[int], num_classes: int):
        super().__init__()
        layers: list[nn.Module] = []
        width = input_dim
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU(inplace=True)]
            width = h
        layers.append(nn.Linear(width, num_classes))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(torch.flatten(x, 1))


def _hidden(value: object) -> tuple[int, ...]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ModelOptionError(f"model option 'hidden' must be a list of layer widths, got {value!r}")
    return tuple(positive_int(f"hidden[{i}]", h) for i, h in enumerate(value))


def mlp(*, input_dim: int = 256, hidden: Sequence[int] = (512, 512), num_classes: int = 10) -> MLP:
    """399,370 parameters with the defaults."""
    return MLP(positive_int("input_dim", input_dim), _hidden(hidden), positive_int("num_classes", num_classes))


def mlp_input(*, input_dim: int, num_classes: int, **_) -> InputSpec:
    return InputSpec("vector", (positive_int("input_dim", input_dim),), positive_int("num_classes", num_classes))
