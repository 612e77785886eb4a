"""Slow workers: a fixed per-worker compute factor (mixed GPUs) and a random straggler model.

``cluster.slowdown`` gives worker *r* a fixed factor (its forward and backward take that many times their
profiled or measured time; 1 = nominal). ``cluster.straggler`` adds transient episodes: at each iteration
a worker not already in an episode starts one with ``probability``; for ``duration`` iterations its
compute takes ``factor`` times longer (on top of its fixed factor). The draws come from a generator seeded
with ``run.seed`` and the rank, so the emulator's worker processes and the simulator see the same
episodes. The factors of a run are a pure function of these numbers (:func:`compute_factors`), which
both the emulator's compute engines and the simulator's workers read.
"""

from __future__ import annotations

import random
from collections.abc import Sequence


def compute_factors(rank: int, iterations: int, *, slowdown: Sequence[float] = (), probability: float = 0.0,
                    factor: float = 1.0, duration: int = 1, seed: int = 0) -> list[float]:
    """Worker ``rank``'s compute factor of iterations 1..``iterations`` (element ``i - 1`` is iteration i)."""
    if not 0 <= probability <= 1:
        raise ValueError(f"straggler probability must be in [0, 1], got {probability}")
    if factor <= 0 or duration < 1:
        raise ValueError(f"straggler factor must be > 0 and duration >= 1, got {factor}, {duration}")
    base = float(slowdown[rank]) if rank < len(slowdown) else 1.0
    if base <= 0:
        raise ValueError(f"slowdown of worker {rank} must be > 0, got {base}")
    out = [base] * iterations
    if probability <= 0 or factor == 1.0:
        return out
    rng = random.Random(f"straggler:{seed}:{rank}")
    left = 0
    for i in range(iterations):
        if left == 0 and rng.random() < probability:
            left = duration
        if left:
            out[i] *= factor
            left -= 1
    return out
