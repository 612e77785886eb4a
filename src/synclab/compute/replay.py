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
profile measured ``update_seconds``, the strategy calls :meth:`ReplayEngine.wait_update`
instead of doing the arithmetic, which on the host CPU would cost what no GPU
does (25M parameters: ~60 ms here). Profiles without it keep the real arithmetic.

Times: a tensor's replayed time is ``profile time × compute.scale × run.dilation
× batch factor`` (the batch factor is 1, except for a process that computes
several workers' batches: ``local`` replays the global batch, a Stanza FC worker
the FC part for each CONV worker it serves — linear in the batch, an assumption
stated in the run's notes).
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import torch

from synclab.compute.engine import EngineBase
from synclab.compute.profile import ModelProfile
from synclab.core import IterationTiming, ParamInfo

SPIN_S = 0.0005


def sleep_until(deadline: float) -> None:
    """Return at ``deadline`` (perf_counter): sleep, then busy-wait the last :data:`SPIN_S`."""
    while True:
        remaining = deadline - time.perf_counter()
        if remaining <= 0:
            return
        if remaining > SPIN_S:
            time.sleep(remaining - SPIN_S)


class ReplayEngine(EngineBase):
    """The :class:`~synclab.compute.engine.Engine` interface, with profiled time in place of PyTorch."""

    replay = True

    def __init__(self, profile: ModelProfile, infos: list[ParamInfo], tensors: list[torch.Tensor], n_layers: int,
                 *, time_factor: float = 1.0, batch_factor: float = 1.0, samples: int = 0):
        super().__init__(infos, tensors, n_layers)
        self.profile = profile
        self.device = tensors[0].device
        self.model = None
        self.loss_fn = None
        self.time_factor = time_factor
        self.batch_factor = batch_factor
        self.samples = samples
        self.layer_of = [i.layer for i in infos]
        self.n_layers = n_layers
        self.bwd = [t.backward_seconds * time_factor for t in profile.tensors]
        self.layer_fwd = [0.0] * n_layers  # replay gates and waits per layer, so forward times are summed once
        for layer, t in zip(self.layer_of, profile.tensors):
            self.layer_fwd[layer] += t.forward_seconds * time_factor
        shares = profile.update_shares()
        self.update_s = None if shares is None else [u * time_factor for u in shares]
        self._update_deadline = 0.0
        self.grads = [torch.zeros_like(t) for t in tensors]
        self._due_s = 0.0
        # rank 0's MG-WFBP profiling reads these (§5.1's per-tensor stopwatch, here exact)
        self.last_forward_s = 0.0
        self.last_backward_start = 0.0
        self.last_ready = [float("nan")] * len(tensors)

    def begin_iteration(self, iteration: int) -> None:
        super().begin_iteration(iteration)
        self._due_s = 0.0

    @property
    def due_s(self) -> float:
        """Compute time the current iteration should take so far (profiled, scaled, dilated)."""
        return self._due_s

    def layers_of(self, indices: Sequence[int]) -> range:
        """The contiguous range of layers holding tensors ``indices`` (forward order)."""
        return range(self.layer_of[indices[0]], self.layer_of[indices[-1]] + 1)

    def forward(self, layers: range, start: float, factor: float = 1.0) -> float:
        """Gate and replay the forward pass of ``layers``, starting at ``start``; returns the deadline reached."""
        deadline = start
        for layer in layers:
            if not self.gates.is_open(layer):
                t0 = time.perf_counter()
                self.gates.wait(layer)
                t1 = time.perf_counter()
                self._gate_wait_s += t1 - t0
                deadline = max(deadline, t1)
            self.check_comm()
            step = self.layer_fwd[layer] * factor
            self._due_s += step
            deadline += step
            sleep_until(deadline)
        return deadline

    def backward(self, indices: Sequence[int], start: float, factor: float = 1.0) -> float:
        """Replay the backward pass of tensors ``indices`` (in backward order) and hand over their gradients."""
        deadline = start
        self.last_backward_start = deadline
        for index in reversed(indices):
            step = self.bwd[index] * factor
            self._due_s += step
            deadline += step
            sleep_until(deadline)
            self.last_ready[index] = time.perf_counter()
            self.hand_over(index, self.grads[index])
        return deadline

    def wait_update(self, indices: Sequence[int]) -> None:
        """Let the profiled optimizer step of tensors ``indices`` pass (the worker-side update, no arithmetic).

        Runs on the communication thread, so it only sleeps: a busy-wait there
        would hold the GIL the compute thread's timing needs. Consecutive waits
        chain their deadlines, so one late wake-up is absorbed by the next.
        """
        now = time.perf_counter()
        self._update_deadline = max(self._update_deadline, now) + sum(self.update_s[i] for i in indices)
        if self._update_deadline > now:
            time.sleep(self._update_deadline - now)

    def run_iteration(self, iteration: int, x, y, start: float | None = None) -> IterationTiming:
        """One replayed forward + backward of the whole model (``x``/``y`` are ignored)."""
        self.begin_iteration(iteration)
        start = time.perf_counter() if start is None else start
        deadline = self.forward(range(self.n_layers), start, self.batch_factor)
        self.last_forward_s = deadline - start - self._gate_wait_s
        self.backward(range(len(self.tensors)), deadline, self.batch_factor)
        end = time.perf_counter()
        self.comm.submit(self.strategy.on_backward_end, iteration)
        self.check_comm()
        return self.timing(iteration, start, end, self.samples)

    def timing(self, iteration: int, start: float, end: float, samples: int) -> IterationTiming:
        """The iteration's record; its scheduling error is the compute time beyond what was due."""
        compute = end - start - self._gate_wait_s
        return IterationTiming(iteration, start, compute, self._gate_wait_s, float("nan"), samples,
                               self._first_grad, schedule_error_s=compute - self._due_s)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {i.name: t.detach().cpu() for i, t in zip(self.infos, self.tensors)}
