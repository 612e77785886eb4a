"""Models by name: the runtime's small CNN and MLP (the paper-scale zoo plugs in here too)."""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class InputSpec:
    """One sample: kind ('image' | 'vector' | 'tokens'), shape, and number of classes."""

    kind: str
    shape: tuple[int, ...]
    num_classes: int


class SmallCNN(nn.Module):
    """CONV layers then FC layers (~2.5 M params), 3x32x32 input; no BatchNorm or dropout so that
    distributed runs are comparable with the single-process reference on the global batch."""

    def __init__(self, num_classes: int = 10):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.classifier = nn.Sequential(nn.Linear(128 * 4 * 4, 1024), nn.ReLU(), nn.Linear(1024, 256), nn.ReLU(),
                                        nn.Linear(256, num_classes))

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


class MLP(nn.Module):
    def __init__(self, input_dim: int = 256, hidden: tuple[int, ...] = (512, 512), num_classes: int = 10):
        super().__init__()
        dims = [input_dim, *hidden]
        layers: list[nn.Module] = []
        for a, b in zip(dims, dims[1:]):
            layers += [nn.Linear(a, b), nn.ReLU()]
        layers.append(nn.Linear(dims[-1], num_classes))
        self.net = nn.Sequential(*layers)

    def forward(self, x):
        return self.net(x)


_BUILDERS = {"smallcnn": SmallCNN, "mlp": MLP}
MODEL_NAMES = tuple(_BUILDERS)


def build_model(name: str, **options) -> nn.Module:
    if name not in _BUILDERS:
        raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
    try:
        return _BUILDERS[name](**options)
    except TypeError as e:
        raise ValueError(f"model {name!r}: {e}") from None


def model_input_spec(name: str, **options) -> InputSpec:
    if name == "smallcnn":
        return InputSpec("image", (3, 32, 32), options.get("num_classes", 10))
    if name == "mlp":
        return InputSpec("vector", (options.get("input_dim", 256),), options.get("num_classes", 10))
    raise ValueError(f"unknown model {name!r}; known: {', '.join(MODEL_NAMES)}")
