"""What a strategy's own simulator model may use (``OwnModel(factory)``, :mod:`synclab.strategies.simmodel`).

The strategy sits a layer below the simulator and never imports it; the simulator calls
``factory(api)`` with a :class:`ModelApi` for each simulated worker, and the object it returns gets
``on_gradient(iteration, index)`` as backward produces each gradient (last tensor first) and
``on_backward_end(iteration)`` after the last — the calls the compute engine makes on the emulator.
Iterations count from 1. The model's job is to open every tensor's gate (:meth:`ModelApi.mark_fresh`)
once that tensor holds the iteration's update; the next forward pass of its layer waits for it.

Work that the real strategy does on its communication thread goes through :meth:`ModelApi.submit`
(one job at a time, in order: ``job(done)`` calls ``done()`` when the real call would return).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

Callback = Callable[[], None]


class ModelApi:
    """One simulated worker's view of the simulation (see the module docstring)."""

    def __init__(self, sim, worker):
        self._sim, self._worker = sim, worker

    # -- what the model may read -------------------------------------------------------------------------

    @property
    def rank(self) -> int:
        return self._worker.rank

    @property
    def world(self) -> int:
        """Workers in the job (with ``OwnModel(mirror=True)`` only rank 0 is simulated; the others mirror it)."""
        return self._sim.world

    @property
    def options(self) -> Any:
        """The strategy's validated Options."""
        return self._sim.options

    @property
    def plan(self) -> Any:
        """What the strategy's ``make_plan`` returned for this job."""
        return self._sim.plan

    @property
    def numels(self) -> Sequence[int]:
        """Elements of each parameter tensor, in forward order."""
        return tuple(self._sim.numels)

    @property
    def now(self) -> float:
        """Simulated seconds."""
        return self._sim.env.now

    # -- what the model may do ----------------------------------------------------------------------------

    def submit(self, job: Callable[[Callback], None]) -> None:
        """Run ``job(done)`` on the worker's communication thread, after the jobs before it."""
        self._worker.comm.submit(job)

    def allreduce(self, numel: int, then: Callback, *, priority: int = 0) -> None:
        """A ring all-reduce of ``numel`` elements among all workers (2(N-1) steps of M/N; needs mirrored ranks);
        its messages carry ``priority`` (smaller is more urgent; only a ``send_policy = "priority"`` link orders by it)."""
        if not self._sim.mirror:
            raise RuntimeError("ModelApi.allreduce models a ring of identical ranks: declare OwnModel(mirror=True)")
        self._sim.ring(numel, then, priority=priority)

    def update(self, iteration: int, tensors: Sequence[int], then: Callback, *, fresh: bool = True) -> None:
        """The worker's optimizer step on each of ``tensors`` in turn (each its profiled share of the update
        time), each gate opened after its step when ``fresh``; ``then()`` after the last."""
        update_tensors(self._sim, self._worker, iteration, list(tensors), then, fresh)

    def mark_fresh(self, index: int, iteration: int) -> None:
        """Tensor ``index`` holds ``iteration``'s update: its gate opens for the next forward pass."""
        self._worker.mark_fresh(index, iteration)

    def after(self, seconds: float, then: Callback) -> None:
        """Call ``then()`` ``seconds`` of simulated time from now."""
        self._sim.net.after(seconds, then)

    def event(self, iteration: int, index: int, kind: str) -> None:
        """Record a per-tensor event (``send_start``, ``send_end``...) as the emulator's events.csv does."""
        self._sim.event(iteration, self.rank, index, kind)


def update_tensors(sim, worker, it: int, tensors: list[int], done, fresh: bool = True, i: int = 0) -> None:
    """The worker-side optimizer step per tensor (its share of update_seconds), then, with the emulator's
    host modelled, the runtime's own work on that tensor (:meth:`~synclab.sim.network.Network.tensor_job`),
    then (``fresh``) its gate opens; ``tensors[i:]`` are still to do; ``done()`` after the last."""
    if i == len(tensors):
        done()
        return
    t = tensors[i]
    net = sim.net

    def updated() -> None:
        if fresh:
            worker.mark_fresh(t, it)
        update_tensors(sim, worker, it, tensors, done, fresh, i + 1)

    start = sim.env.now
    net.after(sim.update_s[t], lambda: (sim.span(worker.rank, "update", it, start, sim.env.now),
                                        net.tensor_job(updated)))
