"""Real compute: the worker's training loop in PyTorch, with per-layer gates and gradient events.

* Gates (DESIGN "Data flow" 1): a forward pre-hook on every module that owns
  parameters waits until all of that layer's parameters are fresh.
* Gradient events (2): ``register_post_accumulate_grad_hook`` hands each
  gradient to the communication thread the moment it is accumulated, marks the
  parameter stale and releases ``param.grad`` so the next backward starts clean.
* The communication thread runs the strategy, so communication overlaps the
  rest of backward and the next forward pass. PyTorch kernels release the GIL,
  and the gRPC core moves bytes outside it, so threads suffice; the overlap is
  measured per iteration (``comm_wait_s`` is the part that did *not* overlap).
"""

from __future__ import annotations

import queue
import threading
import time
from typing import Callable

import torch
from torch import nn

from synclab.core import CommFailed, GradientSink, IterationTiming, ParamInfo, param_layout
from synclab.transport.spans import SpanLog


class FreshGates:
    """Per-layer events: set while every parameter of the layer holds current values."""

    def __init__(self, infos: list[ParamInfo], n_layers: int):
        self._layer_of = [i.layer for i in infos]
        self._stale = [0] * n_layers
        self._events = [threading.Event() for _ in range(n_layers)]
        for e in self._events:
            e.set()
        self._lock = threading.Lock()
        self._pending_it = [0] * len(infos)          # iteration whose update parameter i awaits
        self._outstanding: dict[int, int] = {}        # iteration -> parameters not yet fresh
        self.synced_at: dict[int, float] = {}         # iteration -> perf_counter when all became fresh
        self.error: BaseException | None = None
        self.spans: SpanLog | None = None              # records a gate_wait span whenever a wait blocks

    def mark_stale(self, index: int, iteration: int = 0) -> None:
        layer = self._layer_of[index]
        with self._lock:
            self._stale[layer] += 1
            self._pending_it[index] = iteration
            self._outstanding[iteration] = self._outstanding.get(iteration, 0) + 1
            self._events[layer].clear()

    def mark_fresh(self, index: int) -> None:
        layer = self._layer_of[index]
        with self._lock:
            self._stale[layer] -= 1
            if self._stale[layer] < 0:
                raise RuntimeError(f"parameter {index} marked fresh twice")
            it = self._pending_it[index]
            self._outstanding[it] -= 1
            if self._outstanding[it] == 0:
                del self._outstanding[it]
                self.synced_at[it] = time.perf_counter()
            if self._stale[layer] == 0:
                self._events[layer].set()

    def pending_iteration(self, index: int) -> int:
        return self._pending_it[index]

    def is_open(self, layer: int) -> bool:
        return self._events[layer].is_set()

    def wait(self, layer: int) -> None:
        event = self._events[layer]
        if self.spans is not None and not event.is_set():
            t0 = self.spans.now()
            event.wait()
            self.spans.add("gate_wait", 0, t0, self.spans.now())
        else:
            event.wait()
        if self.error is not None:
            raise CommFailed(str(self.error)) from self.error

    def wait_all(self) -> None:
        for layer in range(len(self._events)):
            self.wait(layer)

    def fail(self, error: BaseException) -> None:
        self.error = error
        for e in self._events:
            e.set()


class CommThread:
    """Runs strategy callbacks in order, off the compute thread."""

    def __init__(self, strategy_ref: Callable[[], GradientSink], gates: FreshGates):
        self._q: queue.SimpleQueue = queue.SimpleQueue()
        self._strategy = strategy_ref
        self._gates = gates
        self._thread = threading.Thread(target=self._run, name="comm", daemon=True)
        self._thread.start()

    def submit(self, fn: Callable, *args) -> None:
        self._q.put((fn, args))

    def _run(self) -> None:
        while True:
            item = self._q.get()
            if item is None:
                return
            fn, args = item
            try:
                fn(*args)
            except BaseException as e:  # noqa: BLE001 - handed to the compute thread, which stops the worker
                self._gates.fail(e)
                return

    def stop(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=10)


class EngineBase:
    """What every compute engine shares: the gates, the communication thread, the events, and the
    per-iteration bookkeeping the worker and the strategies read (gate waits, the first gradient)."""

    replay = False

    def __init__(self, infos: list[ParamInfo], tensors: list[torch.Tensor], n_layers: int):
        self.infos, self.tensors = infos, tensors
        self.gates = FreshGates(infos, n_layers)
        self.strategy: GradientSink | None = None
        self.events = None  # an EventLog, set by the worker
        self.comm = CommThread(lambda: self.strategy, self.gates)
        self._iteration = 0
        self._gate_wait_s = 0.0
        self._first_grad = 0.0

    def attach(self, strategy: GradientSink) -> None:
        self.strategy = strategy

    def hand_over(self, index: int, grad: torch.Tensor) -> None:
        """Parameter ``index``'s gradient is ready: mark it stale and give it to the strategy's thread."""
        if not self._first_grad:
            self._first_grad = time.perf_counter()
        self.gates.mark_stale(index, self._iteration)
        if self.events is not None:
            self.events.record(self._iteration, index, "grad_ready")
        self.comm.submit(self.strategy.on_gradient, self._iteration, index, grad)

    def begin_iteration(self, iteration: int) -> None:
        """Reset the per-iteration bookkeeping; a strategy that runs its own passes (Stanza) calls it first."""
        self._iteration = iteration
        self._gate_wait_s = 0.0
        self._first_grad = 0.0

    @property
    def gate_wait_s(self) -> float:
        """Seconds forward passes of the current iteration have waited on gates so far."""
        return self._gate_wait_s

    @property
    def first_grad(self) -> float:
        """perf_counter when the current iteration's first gradient was handed over (0 before)."""
        return self._first_grad

    def mark_fresh(self, index: int) -> None:
        """What strategies call (as ``ctx.mark_fresh``): parameter ``index`` holds next-iteration values."""
        if self.events is not None:
            self.events.record(self.gates.pending_iteration(index), index, "params_fresh")
        self.gates.mark_fresh(index)

    def wait_fresh(self) -> float:
        t0 = time.perf_counter()
        self.gates.wait_all()
        return time.perf_counter() - t0

    def check_comm(self) -> None:
        """Raise :class:`CommFailed` when the communication thread has failed."""
        if self.gates.error is not None:
            raise CommFailed(str(self.gates.error)) from self.gates.error

    def close(self) -> None:
        self.comm.stop()


class Engine(EngineBase):
    """Forward/backward with gates and gradient hooks; one call per iteration."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, device: torch.device):
        self.model, self.loss_fn, self.device = model, loss_fn, device
        infos, tensors, self.layers = param_layout(model)
        super().__init__(infos, tensors, len(self.layers))
        self._handles = []
        for layer_idx, module in enumerate(self.layers):
            self._handles.append(module.register_forward_pre_hook(self._gate_hook(layer_idx)))
        for info, p in zip(self.infos, self.tensors):
            self._handles.append(p.register_post_accumulate_grad_hook(self._grad_hook(info.index)))

    def _gate_hook(self, layer: int):
        def hook(module, args):
            t0 = time.perf_counter()
            self.gates.wait(layer)
            self._gate_wait_s += time.perf_counter() - t0
        return hook

    def _grad_hook(self, index: int):
        def hook(p: torch.Tensor):
            grad = p.grad
            p.grad = None
            self.hand_over(index, grad)
        return hook

    def run_iteration(self, iteration: int, x: torch.Tensor, y: torch.Tensor, start: float | None = None
                      ) -> IterationTiming:
        """One forward + backward; ``start`` (perf_counter) lets the caller count data loading in."""
        self.begin_iteration(iteration)
        start = time.perf_counter() if start is None else start
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        out = self.model(x)
        loss = self.loss_fn(out, y)
        loss.backward()
        loss_value = float(loss.detach())
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        end = time.perf_counter()
        self.comm.submit(self.strategy.on_backward_end, iteration)
        self.check_comm()
        gate = self._gate_wait_s
        return IterationTiming(iteration, start, end - start - gate, gate, loss_value, int(x.shape[0]),
                               self._first_grad)

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        super().close()
