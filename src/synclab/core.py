"""The worker's shared vocabulary: what the compute engines, the strategies and the roles all speak.

A leaf module (it imports nothing else of SyncLab), so that the engines depend on
the small :class:`GradientSink` protocol here rather than on the strategy package,
and the strategies may import the engines without a cycle.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import torch
from torch import nn


@dataclass(frozen=True, slots=True)
class ParamInfo:
    """One parameter tensor, in forward order: ``index`` 0 is the first layer's first tensor."""

    index: int
    name: str
    shape: tuple[int, ...]
    numel: int
    layer: int


def param_layout(model: nn.Module) -> tuple[list[ParamInfo], list[torch.Tensor], list[nn.Module]]:
    """Parameters in forward (registration) order with the layer (owning module) of each."""
    infos, tensors, layers = [], [], []
    for module_name, module in model.named_modules():
        own = list(module.named_parameters(recurse=False))
        if not own:
            continue
        layers.append(module)
        for pname, p in own:
            name = f"{module_name}.{pname}" if module_name else pname
            infos.append(ParamInfo(len(infos), name, tuple(p.shape), p.numel(), len(layers) - 1))
            tensors.append(p)
    return infos, tensors, layers


@dataclass(frozen=True, slots=True)
class Stopwatch:
    """One iteration's per-tensor clock (MG-WFBP §5.1): forward seconds (gate waits excluded), when
    backward started and when each gradient was ready (perf_counter, NaN for one never produced)."""

    forward_s: float
    backward_start: float
    ready: tuple[float, ...]


@dataclass(slots=True)
class IterationTiming:
    iteration: int
    start: float           # perf_counter at the start of forward
    compute_s: float       # forward + backward, gate waits excluded
    gate_wait_s: float     # time forward spent waiting for parameters
    loss: float
    samples: int
    first_grad: float = 0.0  # perf_counter when backward handed over the first gradient
    schedule_error_s: float = float("nan")  # replay: compute time beyond the profiled time (NaN for real compute)
    stopwatch: Stopwatch | None = None       # with run_iteration(..., stopwatch=True)


class CommFailed(RuntimeError):
    """The communication thread (strategy or transport) failed; the worker must stop."""


class GradientSink(Protocol):
    """What a compute engine calls on the communication thread (a :class:`~synclab.strategies.base.Strategy`)."""

    def on_gradient(self, iteration: int, index: int, grad: torch.Tensor) -> None: ...

    def on_backward_end(self, iteration: int) -> None: ...
