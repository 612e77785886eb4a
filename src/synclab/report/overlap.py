"""How much of a worker's communication was hidden behind its compute, from what the wire did.

Definitions (per worker w and iteration i; spans from ``spans.csv``, see
:mod:`synclab.transport.spans`):

- A *message span* runs from the moment its sender handed the first chunk to
  gRPC to the moment its receiver had the last chunk: the two halves are the
  sender's ``tx`` span and the receiver's ``rx`` span of the same (sender,
  receiver, key, slice, iteration), matched in order. A half whose partner is
  missing stands alone.
- *Communicating* time of (w, i): the length of the union of the spans of
  every message of iteration i that w sent or received — pushes, pulls,
  notifications, broadcasts, collective steps, activations.
- *Compute* of w: the union of its ``compute`` spans (each iteration's forward
  and backward passes) minus its ``gate_wait`` spans (forward blocked on stale
  parameters is not compute), plus its ``update`` spans (worker-side optimizer
  steps, on the communication thread; PS-based strategies update on the shard).
- *Overlapped* time of (w, i): the length of communicating ∩ compute — compute
  of any iteration, so communication of iteration i hidden behind the forward
  pass of i + 1 (P3 §3) counts.
- ``communication_hidden = Σ overlapped / Σ communicating`` over the measured
  (worker, iteration) pairs; none when nothing was communicated (``local``).

This is the share of the communication that compute covered, unlike
``comm_wait_seconds_mean`` (the part of communication the training thread
waited for, MG-WFBP Fig. 8), which stays a separate figure.
"""

from __future__ import annotations

import csv
from collections.abc import Iterable, Sequence
from pathlib import Path

from synclab.report.records import measured_iterations

Interval = tuple[float, float]
COLUMNS = ["worker", "iteration", "communicating_s", "overlapped_s", "hidden"]


def union(intervals: Iterable[Interval]) -> list[Interval]:
    """Sorted, disjoint intervals covering exactly the given ones (empty ones dropped)."""
    out: list[list[float]] = []
    for a, b in sorted((a, b) for a, b in intervals if b > a):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def length(disjoint: Sequence[Interval]) -> float:
    return sum(b - a for a, b in disjoint)


def intersect(x: Sequence[Interval], y: Sequence[Interval]) -> list[Interval]:
    """The intersection of two sorted disjoint interval lists."""
    out, i, j = [], 0, 0
    while i < len(x) and j < len(y):
        a, b = max(x[i][0], y[j][0]), min(x[i][1], y[j][1])
        if b > a:
            out.append((a, b))
        if x[i][1] < y[j][1]:
            i += 1
        else:
            j += 1
    return out


def subtract(x: Sequence[Interval], holes: Sequence[Interval]) -> list[Interval]:
    """``x`` without ``holes`` (both sorted and disjoint)."""
    out: list[Interval] = []
    j = 0
    for a, b in x:
        while j < len(holes) and holes[j][1] <= a:
            j += 1
        k, cur = j, a
        while k < len(holes) and holes[k][0] < b:
            if holes[k][0] > cur:
                out.append((cur, holes[k][0]))
            cur = max(cur, holes[k][1])
            k += 1
        if cur < b:
            out.append((cur, b))
    return out


def message_spans(rows: Iterable[dict]) -> list[tuple[str, str, int, Interval]]:
    """(sender, receiver, iteration, span) per message, joining each tx span to its rx span."""
    tx: dict[tuple, list[dict]] = {}
    rx: dict[tuple, list[dict]] = {}
    for r in rows:
        if r["kind"] == "tx":
            tx.setdefault((r["node"], r["peer"], r["key"], r["slice"], r["iteration"]), []).append(r)
        elif r["kind"] == "rx":
            rx.setdefault((r["peer"], r["node"], r["key"], r["slice"], r["iteration"]), []).append(r)
    out = []
    for k in tx.keys() | rx.keys():
        sends = sorted(tx.get(k, []), key=lambda r: r["start_s"])
        recvs = sorted(rx.get(k, []), key=lambda r: r["start_s"])
        for n in range(max(len(sends), len(recvs))):
            halves = [h for h in (sends[n] if n < len(sends) else None, recvs[n] if n < len(recvs) else None) if h]
            span = (min(h["start_s"] for h in halves), max(h["end_s"] for h in halves))
            out.append((k[0], k[1], k[4], span))
    return out


def overlap_rows(rows: Sequence[dict]) -> list[dict]:
    """One row per (worker, iteration) that computed: communicating and overlapped seconds, hidden share."""
    compute: dict[str, list[Interval]] = {}
    waits: dict[str, list[Interval]] = {}
    updates: dict[str, list[Interval]] = {}
    iterations: dict[str, set[int]] = {}
    for r in rows:
        if r["kind"] == "compute":
            compute.setdefault(r["node"], []).append((r["start_s"], r["end_s"]))
            iterations.setdefault(r["node"], set()).add(r["iteration"])
        elif r["kind"] == "gate_wait":
            waits.setdefault(r["node"], []).append((r["start_s"], r["end_s"]))
        elif r["kind"] == "update":
            updates.setdefault(r["node"], []).append((r["start_s"], r["end_s"]))
    comm: dict[tuple[str, int], list[Interval]] = {}
    for sender, receiver, it, span in message_spans(rows):
        for node in (sender, receiver):
            if it in iterations.get(node, ()):
                comm.setdefault((node, it), []).append(span)
    out = []
    for worker in sorted(compute):
        busy = union(subtract(union(compute[worker]), union(waits.get(worker, []))) + updates.get(worker, []))
        for it in sorted(iterations[worker]):
            talking = union(comm.get((worker, it), []))
            communicating = length(talking)
            overlapped = length(intersect(talking, busy))
            out.append({"worker": worker, "iteration": it, "communicating_s": communicating,
                        "overlapped_s": overlapped,
                        "hidden": overlapped / communicating if communicating > 0 else None})
    return out


def summarize(rows: Sequence[dict], warmup: int = 0, calibration: int = 0) -> dict:
    """``communication_hidden`` (Σ overlapped / Σ communicating, None without communication) and
    ``communicating_seconds_mean`` over the iterations the summary's figures cover: after the first
    ``warmup`` ones and the strategy's ``calibration`` ones (:func:`synclab.report.records.measured_iterations`)."""
    its = set(measured_iterations({r["iteration"] for r in rows}, warmup, calibration)[0])
    measured = [r for r in rows if r["iteration"] in its]
    total = sum(r["communicating_s"] for r in measured)
    return {"communication_hidden": sum(r["overlapped_s"] for r in measured) / total if total > 0 else None,
            "communicating_seconds_mean": total / len(measured) if measured else None}


def write_overlap(path: Path, rows: Sequence[dict]) -> None:
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        for r in rows:
            w.writerow({**r, "communicating_s": f"{r['communicating_s']:.6f}", "overlapped_s": f"{r['overlapped_s']:.6f}",
                        "hidden": "" if r["hidden"] is None else f"{r['hidden']:.4f}"})


def read_overlap(path: Path) -> list[dict]:
    with path.open() as f:
        return [{"worker": r["worker"], "iteration": int(r["iteration"]),
                 "communicating_s": float(r["communicating_s"]), "overlapped_s": float(r["overlapped_s"]),
                 "hidden": float(r["hidden"]) if r["hidden"] else None} for r in csv.DictReader(f)]
