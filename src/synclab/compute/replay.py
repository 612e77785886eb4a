"""Replay compute: advance a clock per tensor from a model profile and hand over real gradient tensors.

A replay worker does no model math. Its parameters are real tensors of the
model's real shapes (so every strategy moves the real bytes and applies its
real update), and one iteration is:

* forward, layer by layer in forward order: wait on the layer's gate (the same
  :class:`~synclab.compute.engine.FreshGates` the real engine uses), then let
  the layer's profiled forward time pass;
* backward, tensor by tensor in backward order: let the tensor's profiled
  backward time pass, then hand its gradient to the communication thread
  exactly as the real engine's gradient hook does.

Gradients are preallocated zero tensors, one per parameter, handed over every
iteration (the values carry no meaning in replay, and zeros stay finite whatever
a strategy adds or averages into them). There is no loss: iterations report NaN.
On the CPU they are views of one anonymous memory mapping (:func:`lazy_zeros`):
the kernel fills such a mapping with zeros lazily, so a page only a reader ever
touches (a PS push, a copy into a merge buffer) stays the kernel's shared zero
page and costs no resident memory, while a page a strategy writes (the ring's
in-place sums) becomes an ordinary one. The bytes every strategy moves are the
same zeros as before; a VGG-16 worker whose strategy only reads its gradients
holds 553 MB less (measured in ``docs/validation/s24-replay-memory``).

Waiting. Deadlines are absolute: after each gate the clock restarts at
``max(deadline, now)`` and every step adds its profiled time to the deadline, so
a late wake-up is absorbed by the following steps instead of accumulating.
``time.sleep`` covers all but the last :data:`SPIN_S` of a wait, which is
busy-waited (Linux wakes a sleeper tens of microseconds late on an idle core,
milliseconds late on a busy one). The scheduling error of an iteration is the
compute time it took minus the compute time it should have taken; it is
reported per iteration (``schedule_error_s``).

Updates. Where a worker applies its own optimizer step (``local``, the
all-reduce strategies, Stanza's CONV workers, SSD-SGD's local update) and the
profile measured ``update_seconds``, the engine's ``update`` (the public API's
optimizer step) lets the tensors' share of that time pass instead of doing the
arithmetic, which on the host CPU would cost what no GPU does (25M parameters:
~60 ms here). Profiles without it keep the real arithmetic.

Times: a tensor's replayed time is ``profile time × compute.scale × run.dilation
× batch factor`` (the batch factor is 1, except for a process that computes
several workers' batches: ``local`` replays the global batch, a Stanza FC worker
the FC part for each CONV worker it serves — linear in the batch, an assumption
stated in the run's notes).
"""

from __future__ import annotations

import math
import mmap
import time
from collections.abc import Sequence

import torch

from synclab.compute.engine import Boundary, EngineBase, TailResult, head_size
from synclab.compute.profile import ModelProfile
from synclab.core import ParamInfo, Stopwatch

SPIN_S = 0.0005


def lazy_zeros(like: Sequence[torch.Tensor]) -> list[torch.Tensor]:
    """Zero tensors of the shapes, dtypes and devices of ``like``; the non-empty CPU ones are views of one anonymous
    mapping that takes resident memory only where it is written (each view starts on a 64-byte boundary)."""
    def span(t: torch.Tensor) -> int:
        return -(-t.numel() * t.element_size() // 64) * 64

    mapped = [t.device.type == "cpu" and t.numel() > 0 for t in like]
    size = sum(span(t) for t, m in zip(like, mapped) if m)
    buf = mmap.mmap(-1, max(size, 1), flags=mmap.MAP_PRIVATE)  # anonymous, private: zero-filled as touched
    out, offset = [], 0
    for t, m in zip(like, mapped):
        if not m:
            out.append(torch.zeros_like(t))
            continue
        out.append(torch.frombuffer(buf, dtype=t.dtype, count=t.numel(), offset=offset).view(t.shape))
        offset += span(t)
    return out


def sleep_until(deadline: float) -> None:
    """Return at ``deadline`` (perf_counter): sleep, then busy-wait the last :data:`SPIN_S`."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > SPIN_S:
            time.sleep(remaining - SPIN_S)


class ReplayEngine(EngineBase):
    """The public compute API of :mod:`synclab.compute.engine`, with profiled time in place of PyTorch."""

    replay = True

    def __init__(self, profile: ModelProfile, infos: list[ParamInfo], tensors: list[torch.Tensor], n_layers: int,
                 *, time_factor: float = 1.0, batch_factor: float = 1.0, samples: int = 0):
        super().__init__(infos, tensors, n_layers)
        self.profile = profile
        self.batch_factor = batch_factor
        self.samples = samples
        self._layer_of = [i.layer for i in infos]
        self._n_layers = n_layers
        self._bwd = [t.backward_seconds * time_factor for t in profile.tensors]
        self._layer_fwd = [0.0] * n_layers  # replay gates and waits per layer, so forward times are summed once
        for layer, t in zip(self._layer_of, profile.tensors):
            self._layer_fwd[layer] += t.forward_seconds * time_factor
        shares = profile.update_shares()
        self.update_s = None if shares is None else [u * time_factor for u in shares]
        self._update_deadline = 0.0
        self._grads = lazy_zeros(tensors)
        self._due_s = 0.0
        self._deadline = 0.0                # where the next replayed step starts
        self._ready = [float("nan")] * len(tensors)  # when each gradient was handed over (the stopwatch, exact)

    def begin_iteration(self, iteration: int, start: float | None = None) -> None:
        super().begin_iteration(iteration, start)
        self._due_s = 0.0
        self._deadline = self._start

    def _resume(self, now: float) -> None:
        self._deadline = max(self._deadline, now)

    def _schedule_error(self, compute_s: float) -> float:
        return compute_s - self._due_s

    @property
    def due_s(self) -> float:
        """Compute time the current iteration should take so far (profiled, scaled, dilated)."""
        return self._due_s

    def _layers_of(self, indices: Sequence[int]) -> range:
        """The contiguous range of layers holding tensors ``indices`` (forward order)."""
        return range(self._layer_of[indices[0]], self._layer_of[indices[-1]] + 1)

    def _forward(self, layers: range, factor: float) -> None:
        """Gate and replay the forward pass of ``layers``."""
        deadline = self._deadline
        for layer in layers:
            if not self.gates.is_open(layer):
                t0 = time.perf_counter()
                self.gates.wait(layer)
                t1 = time.perf_counter()
                self._gate_wait_s += t1 - t0
                deadline = max(deadline, t1)
            self.check_comm()
            step = self._layer_fwd[layer] * factor
            self._due_s += step
            deadline += step
            sleep_until(deadline)
        self._deadline = deadline

    def _backward(self, indices: Sequence[int], factor: float) -> None:
        """Replay the backward pass of tensors ``indices`` (in backward order) and hand over their gradients."""
        deadline = self._deadline
        for index in reversed(indices):
            step = self._bwd[index] * factor
            self._due_s += step
            deadline += step
            sleep_until(deadline)
            self._ready[index] = time.perf_counter()
            self.hand_over(index, self._grads[index])
        self._deadline = deadline

    def _update(self, indices, step, unchanged):
        """With the profile's ``update_seconds``: let the tensors' share of the step pass, no arithmetic.

        Runs on the communication thread, so it only sleeps: a busy-wait there
        would hold the GIL the compute thread's timing needs. Consecutive waits
        chain their deadlines, so one late wake-up is absorbed by the next.
        """
        if self.update_s is None:
            return step()
        now = time.perf_counter()
        self._update_deadline = max(self._update_deadline, now) + sum(self.update_s[i] for i in indices)
        if self._update_deadline > now:
            time.sleep(self._update_deadline - now)
        return unchanged

    def run_iteration(self, iteration, x, y, start=None, *, stopwatch=False):
        """One replayed forward + backward of the whole model (``x``/``y`` are ignored)."""
        self.begin_iteration(iteration, start)
        factor = self.batch_factor * self.factor_at(iteration)  # a slow worker's clock runs that much slower
        self._forward(range(self._n_layers), factor)
        forward_s, backward_start = self._deadline - self._start - self._gate_wait_s, self._deadline
        self._ready = [float("nan")] * len(self.tensors)
        self._backward(range(len(self.tensors)), factor)
        clock = Stopwatch(forward_s, backward_start, tuple(self._ready)) if stopwatch else None
        return self.end_iteration(float("nan"), self.samples, clock)

    def _boundary_width(self) -> int:
        if self.profile.boundary is None:
            raise ValueError(f"the split passes in replay need the profile's 'boundary' "
                             f"(model {self.profile.model!r} has none)")
        return self.profile.boundary.activations_per_sample

    def head_forward(self, x, y):
        """Replay the head's forward; the boundary holds zeros of the profile's size A per sample (the real bytes)."""
        width = self._boundary_width()
        self._forward(self._layers_of(range(head_size(self.infos))), self.batch_factor)
        return Boundary(torch.zeros(self.samples, width), torch.zeros(self.samples, dtype=torch.int64))

    def head_backward(self, grad):
        self._backward(range(head_size(self.infos)), self.batch_factor)

    def tail_step(self, parts, labels, weight):
        """Replay the tail's forward and backward once per part (the profile's T_f is per head batch)."""
        tail = range(head_size(self.infos), len(self.tensors))
        factor = self.batch_factor * len(parts)
        self._forward(self._layers_of(tail), factor)
        self._backward(tail, factor)
        return TailResult([torch.zeros_like(p) for p in parts], [torch.full((1,), math.nan) for _ in parts], math.nan)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {i.name: t.detach().cpu() for i, t in zip(self.infos, self.tensors)}
