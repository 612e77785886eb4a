"""Compute engines: the worker's training loop with per-layer gates and gradient events, and the public
compute API strategies use.

Mechanism (real compute here, replay compute in :mod:`synclab.compute.replay`):

* Gates (DESIGN "Data flow" 1): a forward pre-hook on every module that owns
  parameters waits until all of that layer's parameters are fresh.
* Gradient events (2): ``register_post_accumulate_grad_hook`` hands each
  gradient to the communication thread the moment it is accumulated, marks the
  parameter stale and releases ``param.grad`` so the next backward starts clean.
* The communication thread runs the strategy, so communication overlaps the
  rest of backward and the next forward pass. PyTorch kernels release the GIL,
  and the gRPC core moves bytes outside it, so threads suffice; the overlap is
  measured per iteration (``comm_wait_s`` is the part that did *not* overlap).

The public compute API. Both :class:`Engine` and
:class:`~synclab.compute.replay.ReplayEngine` implement :class:`EngineBase`; a
strategy uses these members and nothing else of an engine (the engine owns the
gates, the hooks and the clock, as PyTorch DDP's engine owns its schedule and
calls communication hooks):

* ``run_iteration(iteration, x, y, start, stopwatch=False)`` -> ``IterationTiming``:
  one forward + backward of the whole model; what :meth:`Strategy.run_iteration`
  does by default, and all a hook-only strategy (``wfbp``) ever needs. With
  ``stopwatch=True`` the timing carries a :class:`~synclab.core.Stopwatch`: the
  forward time and when backward started and each gradient was ready (MG-WFBP
  §5.1's per-tensor profiling; on CUDA the device is synchronized before every
  timestamp).
* A strategy that runs its own passes (Stanza) brackets them with
  ``begin_iteration(iteration, start)`` and ``end_iteration(loss, samples)``;
  ``end_iteration`` tells the strategy that backward is over, raises
  :class:`~synclab.core.CommFailed` if the communication thread failed and
  returns the record. Compute time is the bracket minus gate waits and minus
  what the strategy declares as ``with engine.waiting():`` (waiting for peers).
* The split passes of a model computed as ``classifier(flatten(features(x)))``
  (:data:`HEAD`, :data:`TAIL`): ``head_forward(x, y)`` -> :class:`Boundary`
  (the boundary activations and the labels the tail's loss needs),
  ``head_backward(grad)`` (backward from the gradient of those activations,
  handing over the head's gradients), ``tail_step(parts, labels, weight)`` ->
  :class:`TailResult` (forward, loss scaled by ``weight``, backward of the
  tail on the concatenated parts; each part's input gradient and loss).
* ``update(indices, step, unchanged)``: the worker-side optimizer step of
  tensors ``indices``. ``step()`` does the arithmetic and its result is
  returned; replay compute whose profile measured the update lets the profiled
  time pass instead and returns ``unchanged`` (weights stay). Strategies reach it
  as ``ctx.update`` (and ``ctx.sgd_``), as they reach ``mark_fresh``.
* ``mark_fresh(index)``: parameter ``index`` holds next-iteration values (its gate may open).

Replay compute plays the same calls on a profile-driven clock, so a strategy
never asks which engine it runs on.
"""

from __future__ import annotations

import queue
import threading
import time
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Callable, TypeVar

import torch
from torch import nn

from synclab.compute.evaluation import HeldOutScore, evaluate
from synclab.core import CommFailed, GradientSink, IterationTiming, ParamInfo, Stopwatch, param_layout
from synclab.transport.spans import SpanLog

HEAD, TAIL = "features", "classifier"  # the split models: classifier(flatten(features(x)))

T = TypeVar("T")


def head_size(infos: Sequence[ParamInfo]) -> int:
    """Number of :data:`HEAD` tensors, which come first in forward order; ValueError for a model without the split."""
    n = sum(1 for i in infos if i.name.startswith(HEAD + "."))
    if n == 0 or n == len(infos) or any(not i.name.startswith(HEAD + ".") for i in infos[:n]):
        raise ValueError(f"the split passes need a model computed as {TAIL}(flatten({HEAD}(x))), its {HEAD!r} "
                         f"parameters first; this one has {[i.name for i in infos]}")
    return n


@dataclass(frozen=True, slots=True)
class Boundary:
    """What the head's forward hands to the tail: flattened activations (detached) and the batch's labels."""

    activations: torch.Tensor
    labels: torch.Tensor


@dataclass(frozen=True, slots=True)
class TailResult:
    """The tail's step on concatenated parts: per part the gradient of its activations and its mean loss (shape (1,))."""

    input_grads: list[torch.Tensor]
    losses: list[torch.Tensor]
    loss: float                      # the mean loss over all parts (NaN in replay)


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

    def drain(self) -> None:
        """Block until every callback submitted so far has run, or the thread has stopped (a callback failed).

        The gates open from inside the callbacks (``mark_fresh``), so an open gate says nothing of what the
        callback does after opening it (SSD-SGD issues its pull there): whoever reads the strategy's state after
        the last iteration drains first."""
        ran = threading.Event()
        self._q.put((ran.set, ()))
        while not ran.wait(0.05):
            if not self._thread.is_alive():
                return

    def stop(self) -> None:
        self._q.put(None)
        self._thread.join(timeout=10)


class EngineBase(ABC):
    """The public compute API (module docstring) and what every engine shares: the gates, the
    communication thread, the events and the per-iteration bookkeeping."""

    replay = False  # the worker reads no data set for a replay engine

    def __init__(self, infos: list[ParamInfo], tensors: list[torch.Tensor], n_layers: int):
        self.infos, self.tensors = infos, tensors
        self.gates = FreshGates(infos, n_layers)
        self.strategy: GradientSink | None = None
        self.events = None  # an EventLog, set by the worker
        self.comm = CommThread(lambda: self.strategy, self.gates)
        self._iteration = 0
        self._start = 0.0
        self._gate_wait_s = 0.0
        self._waited_s = 0.0
        self._first_grad = 0.0
        # cluster.slowdown / cluster.straggler: this worker's compute factor of iteration i at [i - 1]
        # (synclab.compute.stragglers); None: every factor 1
        self.factors: Sequence[float] | None = None

    def factor_at(self, iteration: int) -> float:
        """The compute factor of ``iteration`` (1 without a slowdown, or past the list)."""
        f = self.factors
        return f[iteration - 1] if f is not None and 0 < iteration <= len(f) else 1.0

    @property
    def spans(self) -> SpanLog | None:
        """The node's span log: gate waits and update steps are recorded there (None: not recorded)."""
        return self.gates.spans

    @spans.setter
    def spans(self, spans: SpanLog | None) -> None:
        self.gates.spans = spans

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

    # -- the public compute API --------------------------------------------------------------------

    def begin_iteration(self, iteration: int, start: float | None = None) -> None:
        """Start iteration ``iteration``'s compute at ``start`` (perf_counter; default now)."""
        self._iteration = iteration
        self._start = time.perf_counter() if start is None else start
        self._gate_wait_s = 0.0
        self._waited_s = 0.0
        self._first_grad = 0.0

    @contextmanager
    def waiting(self) -> Iterator[None]:
        """Time inside is the strategy waiting for peers: not compute (its ``comm_wait_s``)."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            t1 = time.perf_counter()
            self._waited_s += t1 - t0
            self._resume(t1)

    def end_iteration(self, loss: float = float("nan"), samples: int = 0,
                      stopwatch: Stopwatch | None = None) -> IterationTiming:
        """Backward is over: tell the strategy, raise :class:`CommFailed` if communication failed, return the record."""
        end = time.perf_counter()
        self.comm.submit(self.strategy.on_backward_end, self._iteration)
        self.check_comm()
        compute = end - self._start - self._gate_wait_s - self._waited_s
        return IterationTiming(self._iteration, self._start, compute, self._gate_wait_s, loss, samples,
                               self._first_grad, schedule_error_s=self._schedule_error(compute), stopwatch=stopwatch)

    @abstractmethod
    def run_iteration(self, iteration: int, x, y, start: float | None = None, *,
                      stopwatch: bool = False) -> IterationTiming:
        """One forward + backward of the whole model; ``start`` (perf_counter) lets the caller count data loading in."""

    @abstractmethod
    def head_forward(self, x, y) -> Boundary:
        """Gate and run the :data:`HEAD` forward on ``x``; keeps what :meth:`head_backward` needs."""

    @abstractmethod
    def head_backward(self, grad: torch.Tensor) -> None:
        """Backward through the :data:`HEAD` from the gradient of its activations, handing over its gradients."""

    @abstractmethod
    def tail_step(self, parts: list[torch.Tensor], labels: list[torch.Tensor], weight: float) -> TailResult:
        """Forward, loss × ``weight``, backward of the :data:`TAIL` on the concatenated ``parts``."""

    def update(self, indices: Sequence[int], step: Callable[[], T], unchanged: T) -> T:
        """The worker-side optimizer step of tensors ``indices`` (``step()``), recorded as an ``update`` span."""
        spans = self.gates.spans
        t0 = spans.now() if spans is not None else 0.0
        result = self._update(indices, step, unchanged)
        if spans is not None:
            spans.add("update", 0, t0, spans.now())
        return result

    def mark_fresh(self, index: int) -> None:
        """Parameter ``index`` holds next-iteration values (strategies call it as ``ctx.mark_fresh``)."""
        if self.events is not None:
            self.events.record(self.gates.pending_iteration(index), index, "params_fresh")
        self.gates.mark_fresh(index)

    # -- for the worker ------------------------------------------------------------------------------

    def wait_fresh(self) -> float:
        t0 = time.perf_counter()
        self.gates.wait_all()
        return time.perf_counter() - t0

    def drain_comm(self) -> None:
        """Every strategy callback handed over so far (gradients, backward ends) has run; raise
        :class:`CommFailed` if one failed. The worker calls it before it reads or ends the strategy."""
        self.comm.drain()
        self.check_comm()

    def check_comm(self) -> None:
        """Raise :class:`CommFailed` when the communication thread has failed."""
        if self.gates.error is not None:
            raise CommFailed(str(self.gates.error)) from self.gates.error

    def close(self) -> None:
        self.comm.stop()

    # -- what the engines differ in ------------------------------------------------------------------

    def _update(self, indices: Sequence[int], step: Callable[[], T], unchanged: T) -> T:
        return step()

    def _resume(self, now: float) -> None:
        """The strategy stopped waiting at ``now`` (the replay clock restarts there)."""

    def _schedule_error(self, compute_s: float) -> float:
        return float("nan")  # real compute has no schedule


class Engine(EngineBase):
    """Forward/backward in PyTorch with gates and gradient hooks."""

    def __init__(self, model: nn.Module, loss_fn: nn.Module, device: torch.device):
        self.model, self.loss_fn, self.device = model, loss_fn, device
        infos, tensors, self.layers = param_layout(model)
        super().__init__(infos, tensors, len(self.layers))
        self._ready: list[float] | None = None  # the stopwatch's gradient-ready times, while one runs
        self._head_out: torch.Tensor | None = None
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
            if self._ready is not None:
                self._ready[index] = self._synced_now()
            grad = p.grad
            p.grad = None
            self.hand_over(index, grad)
        return hook

    def _synced_now(self) -> float:
        self._sync()
        return time.perf_counter()

    def _sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def _part(self, name: str) -> nn.Module:
        part = getattr(self.model, name, None)
        if not isinstance(part, nn.Module):
            raise TypeError(f"the split passes need a model with {HEAD!r} and {TAIL!r} modules; "
                            f"{type(self.model).__name__} has no {name!r}")
        return part

    def run_iteration(self, iteration, x, y, start=None, *, stopwatch=False):
        t0 = time.perf_counter()
        self.begin_iteration(iteration, start)
        x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
        self._ready = [float("nan")] * len(self.tensors) if stopwatch else None
        slow = self.factor_at(iteration)
        loss = self.loss_fn(self.model(x), y)
        if slow != 1.0:  # a slower device: the forward's time again x (factor - 1), slept
            self._sync()
            self._sleep_extra(time.perf_counter() - t0, slow)
        backward_start = self._synced_now() if stopwatch or slow != 1.0 else 0.0
        loss.backward()
        loss_value = float(loss.detach())
        self._sync()
        if slow != 1.0:  # and the backward's (its gradients were handed over as they came)
            self._sleep_extra(time.perf_counter() - backward_start, slow)
        clock = None
        if stopwatch:
            clock = Stopwatch(backward_start - t0 - self._gate_wait_s, backward_start, tuple(self._ready))
            self._ready = None
        return self.end_iteration(loss_value, int(x.shape[0]), clock)

    @staticmethod
    def _sleep_extra(took_s: float, factor: float) -> None:
        """Sleep what a device ``factor`` times slower would have taken beyond ``took_s`` (a factor below 1
        cannot speed real compute up: nothing is slept)."""
        if factor > 1.0 and took_s > 0:
            time.sleep(took_s * (factor - 1.0))

    def head_forward(self, x, y):
        x = x.to(self.device, non_blocking=True)
        self._head_out = torch.flatten(self._part(HEAD)(x), 1)
        self._sync()
        return Boundary(self._head_out.detach(), y)

    def head_backward(self, grad):
        out, self._head_out = self._head_out, None
        out.backward(grad.to(self.device))
        self._sync()

    def tail_step(self, parts, labels, weight):
        a = torch.cat(parts).to(self.device).requires_grad_(True)
        y = torch.cat(labels).to(self.device)
        out = self._part(TAIL)(a)
        loss = self.loss_fn(out, y)
        (loss if weight == 1 else loss * weight).backward()
        bounds, lo = [], 0
        for p in parts:
            bounds.append((lo, lo + p.shape[0]))
            lo += p.shape[0]
        with torch.no_grad():
            losses = [self.loss_fn(out[lo:hi], y[lo:hi]).reshape(1).cpu() for lo, hi in bounds]
        self._sync()
        return TailResult([a.grad[lo:hi] for lo, hi in bounds], losses, float(loss.detach()))

    def state_dict(self) -> dict[str, torch.Tensor]:
        return {k: v.detach().cpu() for k, v in self.model.state_dict().items()}

    def evaluate(self, x: torch.Tensor, y: torch.Tensor) -> HeldOutScore:
        """Score the current parameters on held-out ``(x, y)`` (the worker's, once every gate is open)."""
        return evaluate(self.model, x, y, self.device)

    def close(self) -> None:
        for h in self._handles:
            h.remove()
        super().close()
