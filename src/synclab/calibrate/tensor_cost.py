"""The worker runtime's own host time per tensor, outside the all-reduce (``synclab calibrate tensor-cost``;
issue 14: the rings' missing cost).

An all-reduce strategy's communication thread does, for every tensor and besides the ring itself: take the
gradient from the compute thread's queue (``CommThread``), flatten it, record ``send_start``/``send_end``,
apply the worker-side optimizer step (``WorkerContext.sgd_`` -> ``ReplayEngine.update``: in replay a
``time.sleep`` of the tensor's profiled share, which Linux ends tens of microseconds late) and open the
tensor's gate (``mark_fresh``, with its ``params_fresh`` event). The simulator charged only the profiled
update share. This measures the rest in isolation, on this host: the real :class:`~synclab.strategies.
wfbp.Wfbp` strategy in one process with ``world = 1`` (its ring returns at once: no message, no peer), the
real :class:`~synclab.compute.replay.ReplayEngine` of the spec (replayed forward/backward set to zero, so the
gradients are handed over back to back and the communication thread is never idle), the real event log and
spans. Per tensor it reports the wall time the communication thread took beyond the replayed update share
(host seconds), and the process's CPU seconds per tensor.

The mean over iterations after the first (warm-up) is what :data:`synclab.sim.run.DEFAULT_TENSOR_S` holds.
"""

from __future__ import annotations

import statistics
import time


class _Stopwatch:
    """The strategy, and when its communication thread began on this iteration's tensors (perf_counter): the
    first ``on_gradient`` (``wfbp``: every tensor's work runs there) or ``on_backward_end`` (``synceasgd``: the
    gradients' copies into its buffer overlap the backward in a real run; the ring and the per-tensor updates
    run here)."""

    def __init__(self, strategy, at_backward_end: bool):
        self.strategy, self.at_backward_end, self.t0 = strategy, at_backward_end, None

    def on_gradient(self, iteration, index, grad):
        if self.t0 is None and not self.at_backward_end:
            self.t0 = time.perf_counter()
        self.strategy.on_gradient(iteration, index, grad)

    def on_backward_end(self, iteration):
        if self.at_backward_end:
            self.t0 = time.perf_counter()
        self.strategy.on_backward_end(iteration)


def measure(model: str, batch: int, scale: float, dilation: float, iterations: int, strategy: str = "wfbp") -> dict:
    """The communication thread's host time per tensor beyond the replayed update share (mean over the
    iterations after the first), and the process's CPU per tensor."""
    import torch

    from synclab.compute.events import EventLog
    from synclab.config import load_spec, parse_override
    from synclab.config.resolve import resolve_compute
    from synclab.resources import packaged
    from synclab.roles.worker import replay_engine
    from synclab.strategies import registry
    from synclab.strategies.base import WorkerContext
    from synclab.transport.spans import SpanLog

    sets = [f"model.name={model}", f"model.batch_size={batch}", "compute.mode=replay", f"compute.scale={scale}",
            f"run.dilation={dilation}", f"strategy.name={strategy}", "cluster.workers=1"]
    spec, _ = resolve_compute(load_spec(packaged("examples/quickstart.yaml"), [parse_override(s) for s in sets]))
    engine = replay_engine(spec, torch.device("cpu"))
    engine._bwd = [0.0] * len(engine._bwd)  # gradients back to back: the comm thread never waits for one
    engine._layer_fwd = [0.0] * len(engine._layer_fwd)
    names = [i.name for i in engine.infos]
    engine.events = EventLog("worker0", names, enabled=True)
    engine.spans = SpanLog("worker0", enabled=True)
    ctx = WorkerContext(rank=0, world=1, node="worker0", params=engine.infos, tensors=engine.tensors,
                        lr=spec.optimizer.lr, momentum=spec.optimizer.momentum,
                        weight_decay=spec.optimizer.weight_decay, seed=spec.run.seed, mark_fresh=engine.mark_fresh,
                        inbox=None, record_event=engine.events.record, update=engine.update)
    cls = registry.get(strategy)
    # the grouped path (SimModel.host_path) does its per-tensor work after backward; the per-tensor one during it
    grouped = cls.sim_model is not None and cls.sim_model.host_path == "grouped"
    watch = _Stopwatch(cls(ctx), at_backward_end=grouped)
    engine.attach(watch)
    n = len(names)
    shares = sum(engine.update_s) if engine.update_s is not None else 0.0
    walls, cpus = [], []
    for it in range(1, iterations + 1):
        watch.t0 = None
        c0 = time.process_time()
        engine.run_iteration(it, None, None)  # hands all n gradients over at once (zero replayed time)
        engine.wait_fresh()
        c1 = time.process_time()
        # from the comm thread's start on the iteration's tensors to the last gate opening
        walls.append((engine.gates.synced_at[it] - watch.t0 - shares) / n)
        cpus.append((c1 - c0) / n)
    engine.comm.stop()
    keep = slice(1, None)  # the first iteration warms allocators and caches up
    return {"strategy": strategy, "model": model, "batch": batch, "scale": scale, "dilation": dilation, "tensors": n,
            "iterations": iterations, "update_share_s_per_iteration": shares,
            "wall_s_per_tensor_mean": statistics.mean(walls[keep]),
            "wall_s_per_tensor_median": statistics.median(walls[keep]),
            "wall_s_per_tensor_min": min(walls[keep]), "wall_s_per_tensor_max": max(walls[keep]),
            "cpu_s_per_tensor_mean": statistics.mean(cpus[keep])}


