"""``horovod``: Horovod's tensor fusion — a background cycle fuses the gradients ready on every worker into one all-reduce.

What Horovod does (Sergeev & Del Balso, "Horovod: fast and easy distributed deep learning in TensorFlow",
arXiv:1802.05799, 2018, §4 "Tensor Fusion"; the Horovod documentation's "Tensor Fusion" page, knobs
``HOROVOD_CYCLE_TIME`` and ``HOROVOD_FUSION_THRESHOLD``):

- Backward hands each gradient to a background thread and goes on.
- The background thread wakes once per cycle (``cycle_time_ms``, 5 ms by default): it sleeps out what is
  left of the cycle since the last one started, then the workers agree on which tensors are ready on
  *every* worker (Horovod's coordinator, or the bit-vector all-reduce of its response cache). Here that
  negotiation is a ring all-reduce of one ready flag per tensor: a tensor whose flags sum to the world
  size is ready everywhere.
- The agreed tensors are taken in backward order and packed into a fusion buffer up to
  ``fusion_threshold_mb`` (64 MiB by default); each full buffer is one all-reduce (a tensor larger than
  the threshold goes alone). The reduced values are averaged, and each tensor is updated and its gate
  opened. Here the gradients are kept as views of one buffer in backward order, so a fused group (tensors
  consecutive in backward order) is a slice of it, all-reduced in place; Horovod's copy into and out of its
  fusion buffer is left out (a group that is not consecutive is still copied).
- Tensors that became ready during the cycle's work wait for the next cycle.

Every worker runs the same cycles (the ready flags are agreed), so the fused groups, and so the math,
are the same on all workers; the result is synchronous SGD, equal to ``local``'s.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence

import torch
from pydantic import BaseModel, ConfigDict, Field

from synclab.strategies.base import WorkerContext
from synclab.strategies.registry import register
from synclab.strategies.simmodel import OwnModel
from synclab.strategies.wfbp import Wfbp

MIB = 1024 * 1024
FLOAT32_BYTES = 4


class HorovodOptions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    cycle_time_ms: float = Field(5.0, gt=0, description="background cycle, ms (HOROVOD_CYCLE_TIME)")
    fusion_threshold_mb: float = Field(64.0, gt=0, description="largest fused all-reduce, MiB "
                                                               "(HOROVOD_FUSION_THRESHOLD)")


def fuse(ready: Sequence[int], numels: Sequence[int], threshold_bytes: float) -> list[tuple[int, ...]]:
    """Pack ``ready`` (tensor indices, in the order given) into fusion buffers of at most ``threshold_bytes``
    (float32); a tensor larger than the threshold is a buffer of its own."""
    groups: list[tuple[int, ...]] = []
    group: list[int] = []
    size = 0
    for i in ready:
        b = numels[i] * FLOAT32_BYTES
        if group and size + b > threshold_bytes:
            groups.append(tuple(group))
            group, size = [], 0
        group.append(i)
        size += b
    if group:
        groups.append(tuple(group))
    return groups


class HorovodModel:
    """The simulator's model: the same cycles on the simulated clock (every rank mirrors rank 0, so a
    tensor ready on rank 0 is ready everywhere); the negotiation is a ring all-reduce of one float per tensor."""

    def __init__(self, api):
        self.api = api
        self.cycle_s = api.options.cycle_time_ms / 1000
        self.threshold = api.options.fusion_threshold_mb * MIB
        self.pending: list[int] = []
        self.left = 0
        self.iteration = 0

    def on_gradient(self, iteration, index):
        self.pending.append(index)
        if iteration != self.iteration:  # the first gradient of an iteration starts its cycles
            self.iteration, self.left = iteration, len(self.api.numels)
            self.api.after(self.cycle_s, lambda: self._cycle(iteration))

    def on_backward_end(self, iteration):
        pass

    def _cycle(self, it: int) -> None:
        api, start = self.api, self.api.now
        ready = sorted(self.pending, reverse=True)
        self.pending.clear()
        groups = fuse(ready, api.numels, self.threshold)
        api.allreduce(len(api.numels), lambda: self._reduce(it, groups, start))

    def _reduce(self, it: int, groups: list[tuple[int, ...]], start: float) -> None:
        api = self.api
        if groups:
            g = groups[0]
            for t in g:
                api.event(it, t, "send_start")

            def reduced() -> None:
                for t in g:
                    api.event(it, t, "send_end")
                api.update(it, g, lambda: self._reduce(it, groups[1:], start))

            self.left -= len(g)
            api.allreduce(sum(api.numels[t] for t in g), reduced)
            return
        if self.left:
            api.after(max(0.0, start + self.cycle_s - api.now), lambda: self._cycle(it))


@register
class Horovod(Wfbp):
    """``horovod``: Horovod's tensor fusion, a background cycle fusing the ready gradients into all-reduces (Sergeev & Del Balso 2018 §4).

    Every ``cycle_time_ms`` the tensors ready on all workers are fused up to ``fusion_threshold_mb``."""

    name = "horovod"
    Options = HorovodOptions
    sim_model = OwnModel(factory=HorovodModel, per_tensor_host="grouped")

    def __init__(self, ctx: WorkerContext):
        super().__init__(ctx)
        self.options: HorovodOptions = ctx.options
        self._numels = [p.numel for p in ctx.params]
        first = ctx.tensors[0]
        # the gradients as views of one buffer in backward order (the last tensor first): a fused group, a run of
        # tensors consecutive in backward order, is then one slice of it, all-reduced in place with no copy
        self._flat = torch.empty(sum(self._numels), dtype=first.dtype, device=first.device)
        self._offset = [0] * len(self._numels)
        at = 0
        for t in range(len(self._numels) - 1, -1, -1):
            self._offset[t] = at
            at += self._numels[t]
        self._grads = [self._flat[self._offset[t]:self._offset[t] + n] for t, n in enumerate(self._numels)]
        self._lock = threading.Lock()
        self._pending: list[int] = []
        self._thread: threading.Thread | None = None
        self._error: BaseException | None = None
        self._iteration = 0

    def on_gradient(self, iteration, index, grad):
        self._grads[index].copy_(grad.reshape(-1))
        with self._lock:
            self._pending.append(index)
        if iteration != self._iteration:  # the first gradient of an iteration starts its background cycles
            self._iteration = iteration
            self._thread = threading.Thread(target=self._background, args=(iteration,),
                                            name=f"horovod-{iteration}", daemon=True)
            self._thread.start()

    def on_backward_end(self, iteration):
        """Wait for the background cycles of ``iteration``; a failure there stops the worker here."""
        if self._thread is not None:
            self._thread.join()
        if self._error is not None:
            raise self._error

    def _background(self, iteration: int) -> None:
        try:
            self._cycles(iteration)
        except BaseException as e:  # noqa: BLE001 - re-raised on the communication thread (on_backward_end)
            self._error = e

    def _cycles(self, iteration: int) -> None:
        c, cycle_s = self.ctx, self.options.cycle_time_ms / 1000
        threshold = self.options.fusion_threshold_mb * MIB
        left, cycle, start = len(self._numels), 0, time.monotonic()
        while left:
            time.sleep(max(0.0, start + cycle_s - time.monotonic()))
            start = time.monotonic()
            with self._lock:
                mine, self._pending = self._pending, []
            flags = torch.zeros(len(self._numels), dtype=torch.float32)
            flags[mine] = 1.0
            self.allreduce_mean_(flags, f"horovod/ready{cycle}", iteration)  # mean 1: ready on every worker
            everywhere = [i for i in range(len(self._numels) - 1, -1, -1) if flags[i].item() > 1 - 0.5 / c.world]
            with self._lock:  # ready here but not everywhere: stays for the next cycle
                self._pending = sorted(set(self._pending) | (set(mine) - set(everywhere)), reverse=True)
            for k, group in enumerate(fuse(everywhere, self._numels, threshold)):
                self._reduce(iteration, group, f"horovod/c{cycle}g{k}")
                left -= len(group)
            cycle += 1

    def _reduce(self, iteration: int, group: tuple[int, ...], key: str) -> None:
        c = self.ctx
        for t in group:
            c.record_event(iteration, t, "send_start")
        fused = self.allreduce_mean_(self._fusion_buffer(group), key, iteration)
        for t in group:
            c.record_event(iteration, t, "send_end")
        offset = 0
        for t in group:
            n = self._numels[t]
            self._bufs[t] = c.sgd_(t, fused[offset:offset + n], self._bufs.get(t))
            c.mark_fresh(t)
            offset += n

    def _fusion_buffer(self, group: tuple[int, ...]) -> torch.Tensor:
        """The group's gradients, in the group's order, as one flat tensor: the slice of the backward-ordered
        buffer that holds them where the group's indices are consecutive (backward order makes them so), with no
        copy; else a copy of them (what Horovod's fusion buffer is)."""
        if all(b == a - 1 for a, b in zip(group, group[1:])):
            start = self._offset[group[0]]
            return self._flat[start:start + sum(self._numels[t] for t in group)]
        return torch.cat([self._grads[t] for t in group])
