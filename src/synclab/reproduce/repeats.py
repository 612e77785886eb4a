"""A point measured several times (``synclab reproduce --repeats N``): its repeats merged into one record, and
the spread of a metric over them."""

from __future__ import annotations

from typing import Any


def _mean(values: list[Any]) -> Any:
    """The mean of a metric over repeats (numbers only; anything else, or a metric some repeat lacks, is the
    first repeat's value)."""
    if any(v is None or isinstance(v, bool) or not isinstance(v, (int, float)) for v in values):
        return values[0]
    return sum(values) / len(values)


HOST_FIELDS = ("host_load", "host_busy")  # a point's host: 1-minute load at its end, busy fraction of its cores


def merge_repeats(reps: list[dict[str, Any]]) -> dict[str, Any]:
    """One point's record from its repeats' records: metrics averaged, every repeat's metrics kept under
    ``repeat_metrics``, host time summed; one repeat is returned as it is."""
    if len(reps) == 1:
        return reps[0]
    keys = list(dict.fromkeys(k for r in reps for k in r["metrics"]))
    merged = dict(reps[0])
    merged["metrics"] = {k: _mean([r["metrics"].get(k) for r in reps]) for k in keys}
    merged["repeat_metrics"] = [r["metrics"] for r in reps]
    merged["repeats"] = len(reps)
    merged["host_seconds"] = sum(r["host_seconds"] for r in reps)
    for k in HOST_FIELDS:  # the host at its worst over the repeats
        seen = [r[k] for r in reps if k in r]
        if seen:
            merged[k] = max(seen)
    merged["code"] = ", ".join(dict.fromkeys(str(r.get("code", "unknown")) for r in reps))
    return merged


def spread(record: dict[str, Any], metric: str) -> tuple[float, float] | None:
    """(min, max) of ``metric`` over a point's repeats; None for a point run once."""
    vals = [m.get(metric) for m in record.get("repeat_metrics", [])]
    vals = [float(v) for v in vals if isinstance(v, (int, float)) and not isinstance(v, bool)]
    return (min(vals), max(vals)) if len(vals) > 1 else None
