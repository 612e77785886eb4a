"""The model zoo: build a model by name, describe its input, find its CONV/FC boundary.

>>> model = build_model("resnet50")
>>> model_input_spec("resnet50")
InputSpec(kind='image', shape=(3, 224, 224), num_classes=1000, source_vocab=None)

Every model registers its modules in forward order (P3 §4 assigns priorities
in that order; the engine's per-layer gates rely on it). ``smallcnn`` (the
default) and ``mlp`` are small, BatchNorm- and dropout-free models for real
training; the rest reproduce the networks the papers measure, with parameter
counts checked against their tables in ``tests/unit/models/test_param_counts.py``.
Zoo models keep BatchNorm where the architecture has it (it holds parameters),
so with them a W-worker run is not bit-for-bit equal to one process on the
global batch: BN statistics are per worker batch. Dropout defaults to off.
"""

from __future__ import annotations

import functools
import inspect
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from torch import nn

from synclab.models import (
    alexnet,
    densenet,
    googlenet,
    inception,
    inception_v4,
    mlp,
    resnet,
    resnet_cifar,
    smallcnn,
    sockeye,
    vgg,
)
from synclab.models.boundary import conv_fc_boundary
from synclab.models.spec import InputSpec, ModelOptionError

__all__ = ["MODEL_NAMES", "InputSpec", "ModelOptionError", "build_model", "conv_fc_boundary", "count_params",
           "model_input_spec", "tensor_layout"]


@dataclass(frozen=True, slots=True)
class _Entry:
    build: Callable[..., nn.Module]       # keyword-only options with defaults: the one place defaults live
    input_spec: Callable[..., InputSpec]  # receives every option, defaults filled in


_REGISTRY: dict[str, _Entry] = {
    "smallcnn": _Entry(smallcnn.smallcnn, smallcnn.smallcnn_input),
    "mlp": _Entry(mlp.mlp, mlp.mlp_input),
    "resnet20": _Entry(resnet_cifar.resnet20, resnet_cifar.resnet_cifar_input),
    "resnet110": _Entry(resnet_cifar.resnet110, resnet_cifar.resnet_cifar_input),
    "resnet50": _Entry(resnet.resnet50, resnet.resnet_input),
    "resnet152": _Entry(resnet.resnet152, resnet.resnet_input),
    "vgg11": _Entry(vgg.vgg11, vgg.vgg_input),
    "vgg16": _Entry(vgg.vgg16, vgg.vgg_input),
    "vgg19": _Entry(vgg.vgg19, vgg.vgg_input),
    "alexnet": _Entry(alexnet.alexnet, alexnet.alexnet_input),
    "googlenet": _Entry(googlenet.googlenet, googlenet.googlenet_input),
    "googlenet_mgwfbp": _Entry(googlenet.googlenet_mgwfbp, googlenet.googlenet_input),
    "inception_v3": _Entry(inception.inception_v3, inception.inception_input),
    "inception_v4": _Entry(inception_v4.inception_v4, inception_v4.inception_v4_input),
    "densenet161": _Entry(densenet.densenet161, densenet.densenet_input),
    "densenet201": _Entry(densenet.densenet201, densenet.densenet_input),
    "sockeye": _Entry(sockeye.sockeye, sockeye.sockeye_input),
}

MODEL_NAMES: tuple[str, ...] = tuple(_REGISTRY)


def _resolve(name: str, options: dict[str, Any]) -> tuple[_Entry, dict[str, Any]]:
    entry = _REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"unknown model {name!r}; known models: {', '.join(MODEL_NAMES)}")
    defaults = {p.name: p.default for p in inspect.signature(entry.build).parameters.values()
                if p.kind is inspect.Parameter.KEYWORD_ONLY}
    unknown = sorted(set(options) - set(defaults))
    if unknown:
        raise ModelOptionError(f"model {name!r} has no option {', '.join(map(repr, unknown))}; "
                               f"its options: {', '.join(defaults) or '(none)'}")
    return entry, {**defaults, **options}


def build_model(name: str, **options: Any) -> nn.Module:
    """A fresh model ``name`` with ``options``; initialised from torch's global RNG.

    Build inside ``with torch.device("meta"):`` to get shapes and counts without memory.
    Raises ``ValueError`` for an unknown name and :class:`ModelOptionError` for an
    unknown option or a bad value, naming it.
    """
    entry, options = _resolve(name, options)
    return entry.build(**options)


def model_input_spec(name: str, **options: Any) -> InputSpec:
    """The :class:`InputSpec` of one sample for ``build_model(name, **options)``, without building it."""
    entry, options = _resolve(name, options)
    return entry.input_spec(**options)


def count_params(model: nn.Module) -> int:
    """Number of trainable parameters (what the papers' tables count)."""
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def tensor_layout(name: str, **options: Any) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """Names and sizes of ``name``'s parameter tensors in forward order (built on the meta device, cached)."""
    return _tensor_layout(name, json.dumps(options, sort_keys=True))


@functools.lru_cache(maxsize=32)
def _tensor_layout(name: str, options_json: str) -> tuple[tuple[str, ...], tuple[int, ...]]:
    import torch

    with torch.device("meta"):
        model = build_model(name, **json.loads(options_json))
    params = list(model.named_parameters())
    return tuple(n for n, _ in params), tuple(p.numel() for _, p in params)
