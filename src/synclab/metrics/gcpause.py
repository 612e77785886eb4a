"""How long Python's cyclic garbage collector stopped the nodes during training: ``summary.json`` ``gc_pauses``.

A full (generation-2) collection walks every tracked object; a worker that imported torch, grpc and SyncLab
holds ~190 thousand of them, and one pass costs ~50 ms of host time on the 2-core VM (measured, 2026-11-27)
— under dilation D = 16 that is 3 ms of emulated time in which no thread of the node sends or adds. Whether
that happens inside a run is what :class:`GcPauses` records: count and seconds of the collector's passes by
generation (from ``gc.callbacks``), from the ``ready`` barrier to the end of training, into the node's
``gc-<node>.json``; the coordinator folds them into the summary (:func:`merge`). (2026-11-27: a 4-iteration
quickstart run saw at most one generation-0 pass per node, ~0.3 ms.)
"""

from __future__ import annotations

import gc
import json
import time
from pathlib import Path


class GcPauses:
    """Count and total duration of the collector's passes per generation while installed."""

    def __init__(self) -> None:
        self.count = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._t0 = 0.0

    def _callback(self, phase: str, info: dict) -> None:
        if phase == "start":
            self._t0 = time.perf_counter()
        else:
            g = int(info.get("generation", 0))
            self.count[g] += 1
            self.seconds[g] += time.perf_counter() - self._t0

    def install(self) -> GcPauses:
        gc.callbacks.append(self._callback)
        return self

    def remove(self) -> None:
        if self._callback in gc.callbacks:
            gc.callbacks.remove(self._callback)

    def as_dict(self) -> dict:
        return {"collections": list(self.count), "seconds": [round(s, 6) for s in self.seconds]}

    def write(self, path: Path) -> None:
        path.write_text(json.dumps(self.as_dict()) + "\n")


def merge(run_dir: Path) -> dict | None:
    """Every node's ``gc-<node>.json`` of ``run_dir`` into one summary field (the files removed): passes and
    seconds per generation over all nodes, and the most any one node spent; None where no node wrote one."""
    paths = sorted(run_dir.glob("gc-*.json"))
    if not paths:
        return None
    nodes = {p.stem.removeprefix("gc-"): json.loads(p.read_text()) for p in paths}
    spent = {n: sum(d["seconds"]) for n, d in nodes.items()}
    worst = max(spent, key=spent.__getitem__)
    merged = {"collections": [sum(d["collections"][g] for d in nodes.values()) for g in range(3)],
              "seconds": [round(sum(d["seconds"][g] for d in nodes.values()), 6) for g in range(3)],
              "nodes": len(nodes), "most_node": worst, "most_node_seconds": round(spent[worst], 6)}
    for p in paths:
        p.unlink()
    return merged
