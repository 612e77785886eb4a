"""Who waited for whom: each worker's compute and wait time, the wait attributed to the slowest worker.

From the iteration rows alone (``iterations.csv``: ``compute_s`` and ``comm_wait_s`` per worker per
iteration), so a straggler shows in ``summary.json`` without reading a timeline. For a lockstep strategy
(every worker waits for every other in each iteration), in iteration *i* the worker with the longest
``compute_s`` is the *slowest*; another worker *w* that computed ``c_w`` and waited ``q_w`` waited
``min(q_w, c_slowest - c_w)`` for it, the rest of its wait is *communication* (the network and the
strategy's own synchronization). A strategy that does not move in lockstep waits for no one worker: all
of its wait counts as communication.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

COMMUNICATION = "communication"


def attribute_waits(rows: Iterable[Any], *, lockstep: bool) -> dict[str, dict[str, Any]]:
    """``{worker: {"compute_s", "wait_s", "waited_for": {worker or "communication": s}, "slowest_iterations"}}``
    over ``rows`` (objects with ``iteration``, ``rank``, ``compute_s``, ``comm_wait_s``: the measured ones),
    workers named ``worker<rank>``."""
    by_it: dict[int, list[Any]] = {}
    for r in rows:
        by_it.setdefault(r.iteration, []).append(r)
    out: dict[str, dict[str, Any]] = {}

    def entry(rank: int) -> dict[str, Any]:
        return out.setdefault(f"worker{rank}", {"compute_s": 0.0, "wait_s": 0.0, "waited_for": {},
                                                "slowest_iterations": 0})

    for it in sorted(by_it):
        group = by_it[it]
        slow = max(group, key=lambda r: (r.compute_s, -r.rank))
        if lockstep and len(group) > 1:
            entry(slow.rank)["slowest_iterations"] += 1
        for r in group:
            e = entry(r.rank)
            e["compute_s"] += r.compute_s
            e["wait_s"] += r.comm_wait_s
            for_slow = min(r.comm_wait_s, max(0.0, slow.compute_s - r.compute_s)) if lockstep and r is not slow else 0.0
            if for_slow > 0:
                key = f"worker{slow.rank}"
                e["waited_for"][key] = e["waited_for"].get(key, 0.0) + for_slow
            rest = r.comm_wait_s - for_slow
            if rest > 0:
                e["waited_for"][COMMUNICATION] = e["waited_for"].get(COMMUNICATION, 0.0) + rest
    return dict(sorted(out.items(), key=lambda kv: int(kv[0][6:])))
