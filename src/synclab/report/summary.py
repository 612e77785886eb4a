"""The cluster figures of ``summary.json``, computed from iteration rows (the coordinator calls this)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from synclab.report.records import IterationRow, iteration_phases, measured_iterations
from synclab.report.stragglers import attribute_waits

PER_WORKER_MAX = 64  # per_worker is left out of larger (simulated) clusters' summaries


def compute_summary(iter_rows: Iterable[Mapping[str, Any] | IterationRow], warmup: int = 0, *,
                    calibration: int = 0, lockstep: bool = True) -> dict[str, Any]:
    """Throughput, iteration time and compute vs non-overlapped communication of a run.

    ``iter_rows``: one row per worker per iteration (``iterations.csv`` columns,
    as :class:`IterationRow` or mappings of them). Definitions:

    - Every figure is a *steady-state* figure: it covers only the iterations of phase ``steady``
      (:func:`synclab.report.records.iteration_phases`). Left out are the first ``warmup`` iteration
      numbers present (in increasing order: warm-up) and iterations 1..``calibration``, those the
      strategy spent measuring before it planned (``Strategy.calibration_iterations``: MG-WFBP's profiling
      iterations, §5.1, which run as WFBP). The steady iterations are the *measured* ones.
      ``phases`` counts the iterations of each phase. Where no steady iteration is left (a run no longer
      than its calibration), the figures cover the calibration iterations after the warm-up instead and
      ``figures_cover`` says ``calibration`` (otherwise ``steady``).
    - ``lockstep`` (the strategy's ``Strategy.lockstep``, recorded as ``pace``):
      whether every worker waits for every other in each iteration.
    - Lockstep (``pace: slowest``): cluster iteration time of iteration i
      ``T_i = max over workers of iteration_s`` (synchronous training moves at
      the slowest worker's pace); cluster samples ``S_i = sum over workers of
      samples``; ``throughput_samples_per_s = sum_i S_i / sum_i T_i`` over
      measured iterations: the mean of the per-iteration throughput
      ``S_i / T_i`` weighted by ``T_i``, i.e. samples per second of wall time (a
      plain mean of the ratios would over-weight fast iterations).
    - Not lockstep (``pace: own``; asynchronous PS, SSD-SGD's local
      iterations): no worker waits for the others' i-th iteration, so the
      slowest one's i-th is not the cluster's pace (with workers that take
      turns being slow, the maxima add up to more than any worker's time).
      ``T_i = mean over workers of iteration_s``, and
      ``throughput_samples_per_s = sum over workers w of S_w / T_w``, each
      worker's measured samples over its own measured time: the rates of
      workers that run side by side add up.
    - ``iteration_seconds``: mean, p50, p99, min and max of the ``T_i``
      (percentiles interpolate linearly between order statistics).
    - ``compute_seconds_mean`` and ``comm_wait_seconds_mean``: means of
      ``compute_s`` and ``comm_wait_s`` over every measured (worker, iteration) row.
    - When every measured row has ``comm_span_s``: ``comm_span_seconds_mean``
      likewise — the time from an iteration's first gradient to all its
      parameters fresh (it contains the rest of backward, so it is not the
      communication time; the share of communication hidden behind compute is
      ``communication_hidden``, measured from the wire by
      :mod:`synclab.report.overlap`).
    - ``per_worker`` (2 to :data:`PER_WORKER_MAX` workers): each worker's measured compute and wait
      seconds, the wait attributed to the slowest worker of each iteration or to communication
      (:func:`synclab.report.stragglers.attribute_waits`).
    - ``measured_iterations``: how many iterations the figures cover.
    - When measured rows carry ``schedule_error_s`` (replay): ``schedule_error``
      with the mean and max seconds, and the p50/p99/max of each row's
      ``schedule_error_s / iteration_s`` — how far replay's clock ran late,
      relative to the iteration.

    Raises ValueError when warm-up leaves no iteration, or a row is malformed.
    """
    rows = [r if isinstance(r, IterationRow) else IterationRow.from_mapping(r) for r in iter_rows]
    by_iteration: dict[int, list[IterationRow]] = {}
    for r in rows:
        by_iteration.setdefault(r.iteration, []).append(r)
    phases = iteration_phases(by_iteration, warmup, calibration)
    measured_its, cover = measured_iterations(by_iteration, warmup, calibration)
    if not measured_its:
        raise ValueError(f"no iterations left after {warmup} warm-up iteration(s) "
                         f"({len(by_iteration)} iteration(s) recorded)")
    pace = max if lockstep else np.mean
    cluster_s = np.array([pace([r.iteration_s for r in by_iteration[i]]) for i in measured_its], dtype=float)
    measured = [r for i in measured_its for r in by_iteration[i]]
    total_s = float(cluster_s.sum())
    if total_s <= 0:
        raise ValueError("measured iteration times sum to zero")
    if lockstep:
        throughput = sum(r.samples for r in measured) / total_s
    else:  # each worker's samples over its own time, added up
        samples, seconds = Counter(), Counter()
        for r in measured:
            samples[r.rank] += r.samples
            seconds[r.rank] += r.iteration_s
        if min(seconds.values()) <= 0:
            raise ValueError("a worker's measured iteration times sum to zero")
        throughput = sum(samples[w] / seconds[w] for w in seconds)
    out: dict[str, Any] = {
        "measured_iterations": len(measured_its),
        "phases": {p: sum(1 for q in phases.values() if q == p) for p in ("warmup", "calibration", "steady")},
        "figures_cover": cover,
        "pace": "slowest" if lockstep else "own",
        "throughput_samples_per_s": throughput,
        "iteration_seconds": {
            "mean": float(cluster_s.mean()),
            "p50": float(np.percentile(cluster_s, 50)),
            "p99": float(np.percentile(cluster_s, 99)),
            "min": float(cluster_s.min()),
            "max": float(cluster_s.max()),
        },
        "compute_seconds_mean": float(np.mean([r.compute_s for r in measured])),
        "comm_wait_seconds_mean": float(np.mean([r.comm_wait_s for r in measured])),
    }
    if 1 < len({r.rank for r in measured}) <= PER_WORKER_MAX:  # who computed how long, who waited for whom
        out["per_worker"] = attribute_waits(measured, lockstep=lockstep)
    if all(r.comm_span_s is not None for r in measured):
        out["comm_span_seconds_mean"] = float(np.mean([r.comm_span_s for r in measured]))
    sched = [r for r in measured if r.schedule_error_s is not None]
    if sched:
        err = np.array([r.schedule_error_s for r in sched])
        frac = np.array([r.schedule_error_s / r.iteration_s for r in sched if r.iteration_s > 0])
        out["schedule_error"] = {"mean_seconds": float(err.mean()), "max_seconds": float(err.max()),
                                 "fraction_p50": float(np.percentile(frac, 50)) if len(frac) else None,
                                 "fraction_p99": float(np.percentile(frac, 99)) if len(frac) else None,
                                 "fraction_max": float(frac.max()) if len(frac) else None}
    return out
