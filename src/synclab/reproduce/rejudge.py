"""Re-judging a checked-in record: the claims judged again from its ``points.csv`` (and ``repeats.csv``) with
the judge of this checkout, no point re-run.

A judge change (issue 51's stricter rules) must not wait for a new run to show what it does, and a document
built from verdicts must not hold verdicts an older judge gave. :func:`rejudge` rebuilds the point records the
runner judged, judges every claim again, and rewrites ``verdict.json`` in place: its claims, calibration
checks, verdict and the target's notes (which explain the claims), and under ``rejudged`` what changed (each claim's verdict before and after, and why) with
the counts before, so the document's "what changed" table comes from the record, not from a hand-typed list.
A re-judge that changes nothing keeps the ``rejudged`` entry of the one that did.
"""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path
from typing import Any

from synclab.fileio import write_atomic
from synclab.reproduce.runner import code_version, judge_all, verdict_text
from synclab.reproduce.schema import Target
from synclab.reproduce.verdict import VERDICTS, verdict_of

# points.csv columns that are neither an axis nor a metric (runner.write_points_csv)
BOOKKEEPING = ("point", "repeats", "iteration_s_spread", "host_seconds", "host_load", "host_busy")


def _rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def _metrics(row: dict[str, str], skip: set[str]) -> dict[str, Any]:
    """A csv row's metrics: every column that is not an axis or bookkeeping; empty cells are absent values."""
    out: dict[str, Any] = {}
    for k, v in row.items():
        if k in skip:
            continue
        out[k] = None if v in ("", None) else v
    return out


def records_from_csv(record: Path, axes: list[str]) -> list[dict[str, Any]]:
    """The point records a run judged, rebuilt from ``record/points.csv`` (each point's repeat means) and, when
    there, ``record/repeats.csv`` (each repeat's metrics, so that repeated points are judged per repeat too)."""
    path = record / "points.csv"
    if not path.exists():
        raise FileNotFoundError(f"{path}: no points.csv to re-judge from")
    skip = {*axes, *BOOKKEEPING}
    records = []
    for row in _rows(path):
        records.append({"id": row["point"], "values": {a: row[a] for a in axes if a in row},
                        "metrics": _metrics(row, skip)})
    reps = record / "repeats.csv"
    if reps.exists():
        by_point: dict[str, list[dict[str, Any]]] = {}
        for row in _rows(reps):
            by_point.setdefault(row["point"], []).append(_metrics(row, {*skip, "repeat"}))
        for r in records:
            runs = by_point.get(r["id"], [])
            if len(runs) > 1:
                r["repeat_metrics"], r["repeats"] = runs, len(runs)
    return records


def _reason(before: dict[str, Any] | None, after: dict[str, Any], role: str) -> str:
    """Why a claim's verdict moved: the new judge's own words (the caveat and the value list left out)."""
    why = after.get("why", "").split(". Known difference:")[0].split(" [ratio by ")[0]
    if role == "calibration" and (before is None or before.get("role", "claim") != "calibration"):
        why = f"now a calibration check, not counted as a claim; {why}"
    return why


def judge_version() -> str:
    """The commit of the judge's code (this package), ``-dirty`` only when the package itself has uncommitted
    changes: the records a re-judge rewrites must not mark the judge as dirty."""
    import subprocess

    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "--short=10", "HEAD"], capture_output=True,
                              text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(here), "diff", "--quiet", "HEAD", "--", "."], timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return code_version(here)
    if head.returncode != 0:
        return code_version(here)
    return head.stdout.strip() + ("-dirty" if dirty.returncode != 0 else "")


def rejudged(target: Target, record: Path, judge: str | None = None) -> dict[str, Any]:
    """``record``'s verdict with ``target``'s claims judged again from its points, written nowhere (what
    :func:`rejudge` writes, and what ``synclab docs --check`` compares with the file). The record must belong to
    ``target`` (its ``verdict.json`` names it). ``judge``: the judge's version to record where a verdict moves
    (default :func:`judge_version`)."""
    path = record / "verdict.json"
    old = json.loads(path.read_text())
    if old.get("target") != target.id:
        raise ValueError(f"{path}: the record is of target {old.get('target')!r}, not {target.id!r}")
    records = records_from_csv(record, list(old["axes"]))
    judged = judge_all(target, records)
    claims = [c for c, x in zip(judged, target.claims) if x.role == "claim"]
    checks = [c for c, x in zip(judged, target.claims) if x.role == "calibration"]
    for c in checks:
        c["role"] = "calibration"
    before = {c["id"]: c for c in [*old.get("claims", []), *old.get("calibration_checks", [])]}
    changes = []
    for c, x in zip(judged, target.claims):
        prev = before.get(c["id"])
        moved_role = x.role != (prev or {}).get("role", "claim")
        if prev is None or prev["verdict"] != c["verdict"] or moved_role:
            changes.append({"id": c["id"], "role": x.role, "before": None if prev is None else prev["verdict"],
                            "after": c["verdict"], "why": _reason(prev, c, x.role)})
    new = {**old, "claims": claims, "calibration_checks": checks, "notes": target.notes,
           "verdict": old["verdict"] if old.get("verdict") == "failed" else verdict_of(claims, checks)}
    if changes or new["verdict"] != old["verdict"]:
        new["rejudged"] = {
            "written": time.strftime("%Y-%m-%d %H:%M:%S"), "judge": judge or judge_version(),
            "verdict_before": old["verdict"],
            "counts_before": {"claims": _count(old.get("claims", [])),
                              "calibration_checks": _count(old.get("calibration_checks", []))},
            "changes": changes}
    return new


def rejudge(target: Target, record: Path, judge: str | None = None) -> dict[str, Any]:
    """Judge ``target``'s claims again from the record in ``record`` and rewrite its ``verdict.json``
    (:func:`rejudged`); returns it."""
    new = rejudged(target, record, judge)
    write_atomic(record / "verdict.json", verdict_text(new))
    return new


def _count(claims: list[dict[str, Any]]) -> dict[str, int]:
    return {k: sum(c["verdict"] == k for c in claims) for k in VERDICTS}
