"""The one sweep runner every reproduction target uses.

For each point of the chosen form (quick or full) it runs the emulator or the simulator into
``OUT/points/<point-id>/`` and keeps the point's metrics in ``record.json`` there; a point whose
record exists with the same overrides is kept and skipped (resumable). With ``repeats`` > 1 an emulated
point runs that many times (the second into ``<point-id>.r2/``, and so on; simulated and modelled points
are deterministic and run once): its metrics are the repeats' mean, ``repeats.csv`` holds every repeat,
and each claim is judged on every repeat too, so the verdict says how many repeats agree with it.
Then it writes ``OUT/points.csv``, ``OUT/<target>.png`` and ``OUT/verdict.json``.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from synclab.fileio import write_atomic
from synclab.reproduce.calibration import CALIBRATION, Scale, compute_scale, load_calibration
from synclab.reproduce.figure import draw
from synclab.reproduce.points import RUNNERS, Point, expand
from synclab.reproduce.repeats import HOST_FIELDS, merge_repeats, spread
from synclab.reproduce.schema import Target
from synclab.reproduce.verdict import judge, reads, verdict_of
from synclab.resources import locate

PointRunner = Callable[[Target, Path, Point, Path, Callable[[str], None]], dict]


def calibrate(target: Target, root: Path) -> Scale | None:
    if target.calibration is None:
        return None
    c = target.calibration
    table = load_calibration(locate(CALIBRATION, root))
    return compute_scale(table.find(c.model, c.gpu, c.batch_size))


def code_version(root: Path) -> str:
    """The checkout a point ran from: ``git describe --always --dirty`` of ``root``, else the package version.

    Stamped on every point and the verdict, so a document built from runs of different code says so."""
    try:
        r = subprocess.run(["git", "-C", str(root), "describe", "--always", "--dirty", "--abbrev=10"],
                           capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        r = None
    if r is not None and r.returncode == 0 and r.stdout.strip():
        return r.stdout.strip()
    from synclab import __version__
    return f"synclab {__version__}"


def default_out(root: Path, target: Target, quick: bool) -> Path:
    return root / "runs" / "reproduce" / (target.id + ("-quick" if quick else ""))


def portable(override: str) -> str:
    """An override as it reads in any checkout. A calibrated point replays a profile by its absolute path
    (``compute.profile=/CHECKOUT/profiles/...``); that is named from its ``profiles`` directory, so a record
    written in another checkout (a worktree, a fresh clone) still counts as done."""
    key, _, value = override.partition("=")
    parts = Path(value).parts
    if key != "compute.profile" or not Path(value).is_absolute() or "profiles" not in parts:
        return override
    i = len(parts) - 1 - parts[::-1].index("profiles")
    return f"{key}={Path(*parts[i:])}"


def _load_record(path: Path, point: Point) -> dict | None:
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    same = [portable(o) for o in record.get("overrides", [])] == [portable(o) for o in point.overrides]
    return record if same else None


def repeat_dir(out: Path, point: Point, repeat: int) -> Path:
    """The run directory of a point's ``repeat``-th run (1-based): ``points/<id>/``, then ``points/<id>.rN/``."""
    return out / "points" / (point.id if repeat == 1 else f"{point.id}.r{repeat}")


def _repeats_on_disk(out: Path, point: Point) -> int:
    """The highest repeat of ``point`` already recorded with its overrides (so a later run with fewer
    ``--repeats`` still counts every repeat measured before)."""
    found = 1
    for d in (out / "points").glob(f"{point.id}.r*"):
        n = d.name[len(point.id) + 2:]
        if n.isdigit() and _load_record(d / "record.json", point) is not None:
            found = max(found, int(n))
    return found


def write_points_csv(path: Path, records: list[dict[str, Any]]) -> None:
    """``points.csv``: a row per point (the repeats' means); with repeats, the count and the relative spread
    (max - min) / mean of ``iteration_s``, and ``repeats.csv`` beside it with a row per repeat. ``host_load``:
    the host's 1-minute load average when the point ended (the highest of its repeats), to tell a point run on
    an overloaded host (C3) from one that was not; ``host_busy``: the busy fraction of the host's cores over an
    emulated point's measured iterations (``host_cpu`` of its summary; the highest of its repeats)."""
    axis = list(dict.fromkeys(k for r in records for k in r["values"]))
    metrics = list(dict.fromkeys(k for r in records for k in r["metrics"]))
    repeated = any(r.get("repeats", 1) > 1 for r in records)

    def cells(m: dict[str, Any]) -> list[Any]:
        return ["" if m.get(k) is None else m[k] for k in metrics]

    with path.open("w", newline="") as f:
        w = csv.writer(f)
        # points recorded before these were kept have none
        host = [k for k in HOST_FIELDS if any(k in r for r in records)]
        w.writerow(["point", *axis, *metrics, *(["repeats", "iteration_s_spread"] if repeated else []),
                    "host_seconds", *host])
        for r in records:
            extra = []
            if repeated:
                s, mean = spread(r, "iteration_s"), r["metrics"].get("iteration_s")
                extra = [r.get("repeats", 1), "" if s is None or not mean else f"{(s[1] - s[0]) / mean:.4f}"]
            w.writerow([r["id"], *(r["values"].get(k, "") for k in axis), *cells(r["metrics"]), *extra,
                        f"{r['host_seconds']:.1f}", *(r.get(k, "") for k in host)])
    if repeated:
        with (path.parent / "repeats.csv").open("w", newline="") as f:
            w = csv.writer(f)
            w.writerow(["point", "repeat", *axis, *metrics])
            for r in records:
                for i, m in enumerate(r.get("repeat_metrics", [r["metrics"]]), start=1):
                    w.writerow([r["id"], i, *(r["values"].get(k, "") for k in axis), *cells(m)])


def verdict_text(verdict: dict[str, Any]) -> str:
    """A verdict as ``verdict.json`` holds it."""
    return json.dumps(verdict, indent=1, default=str) + "\n"


def read_points_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _judge(claim, rows: list[dict[str, Any]], spread: float | None = None) -> dict[str, Any]:
    try:
        return judge(claim, rows, spread)
    except ValueError as e:  # a metric the points do not have: say so rather than stop the whole target
        return {"id": claim.id, "quote": claim.quote, "source": claim.source, "paper_value": claim.paper_value,
                "unit": claim.unit, "synclab_value": None, "verdict": "not run", "why": str(e)}


def _repeat_rows(records: list[dict[str, Any]], i: int) -> list[dict[str, Any]]:
    """The rows of the ``i``-th repeat (0-based): each point's ``i``-th run; a point run once (deterministic,
    or only once so far) stands in every repeat with its one value, a point with fewer repeats is left out."""
    rows = []
    for r in records:
        reps = r.get("repeat_metrics")
        if reps is None:
            rows.append({**r["values"], **r["metrics"]})
        elif i < len(reps):
            rows.append({**r["values"], **reps[i]})
    return rows


def _repeated(claim, records: list[dict[str, Any]]) -> bool:
    """Whether some point ``claim`` reads was run more than once."""
    return any(r.get("repeats", 1) > 1 and reads(claim, r["values"]) for r in records)


def claim_spreads(target: Target, records: list[dict[str, Any]]) -> list[float | None]:
    """Per claim, the relative spread (max - min) / |mean| of its value over the repeats (None where none of its
    points was repeated): the measured noise its margin must at least cover (``verdict.noise_margin``)."""
    n = max((r.get("repeats", 1) for r in records), default=1)
    out: list[float | None] = []
    for claim in target.claims:
        values = [] if n < 2 or not _repeated(claim, records) else [
            v for v in (_judge(claim, _repeat_rows(records, i))["synclab_value"] for i in range(n)) if v is not None]
        mean = sum(values) / len(values) if values else 0.0
        out.append((max(values) - min(values)) / abs(mean) if len(values) > 1 and mean else None)
    return out


def judge_all(target: Target, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every claim of ``target`` judged on the points' (repeat-averaged) metrics, with its repeat spread as the
    least noise margin, then on every repeat (:func:`judge_repeats`)."""
    rows = [{**r["values"], **r["metrics"]} for r in records]
    spreads = claim_spreads(target, records)
    claims = [_judge(c, rows, s) for c, s in zip(target.claims, spreads)]
    judge_repeats(claims, target, records, spreads)
    return claims


def judge_repeats(claims: list[dict[str, Any]], target: Target, records: list[dict[str, Any]],
                  spreads: list[float | None] | None = None) -> None:
    """Add to each judged claim (on the repeats' means) its value and verdict in every repeat: ``repeats``
    {values, verdicts, agree}, and say in ``why`` how many repeats give the same verdict. A claim none of whose
    points was run more than once (``--points N --repeats 2`` repeats only the first N) gets nothing: its one
    value standing in every repeat would read as repeats that agree."""
    n = max((r.get("repeats", 1) for r in records), default=1)
    if n < 2:
        return
    spreads = spreads or [None] * len(target.claims)
    per = [[_judge(c, _repeat_rows(records, i), s) for c, s in zip(target.claims, spreads)] for i in range(n)]
    for k, claim in enumerate(claims):
        runs = [p[k] for p in per if p[k]["synclab_value"] is not None]
        if claim["synclab_value"] is None or not runs or not _repeated(target.claims[k], records):
            continue
        values = [p["synclab_value"] for p in runs]
        agree = sum(p["verdict"] == claim["verdict"] for p in runs)
        claim["repeats"] = {"values": values, "verdicts": [p["verdict"] for p in runs], "agree": agree}
        claim["why"] += (f" Over {len(runs)} repeats: {min(values):.3g} to {max(values):.3g}; "
                         f"{agree} of {len(runs)} give this verdict alone"
                         + ("." if agree == len(runs) else " (the verdict is not settled by one run)."))


def run_target(target: Target, root: Path, out: Path, *, quick: bool, extra: list[str] = (),
               run_point: PointRunner | None = None, console=None, limit: int | None = None,
               max_dilation: int | None = None, repeats: int = 1) -> dict[str, Any]:
    """Run (or resume) one target; returns the verdict written to ``out/verdict.json``.

    ``repeats``: run each emulated point this many times (at least; repeats measured before are kept).

    ``limit``: run only the form's first ``limit`` points (a smoke run: the claims that need the others are
    'not run'). ``max_dilation``: cap every emulated point's D (a smoke run; see :func:`expand`)."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = console or Console(stderr=True)
    scale = calibrate(target, root)
    if scale is not None:
        console.print(f"calibration: {scale.describe()}")
    points = expand(target, root, quick, scale, list(extra), max_dilation=max_dilation)
    if limit is not None:
        points = points[:limit]
    out.mkdir(parents=True, exist_ok=True)
    records, reused, failures = [], 0, []
    code = code_version(root)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"{target.id} ({'quick' if quick else 'full'})", total=len(points))
        for p in points:
            record, ran = _run_repeats(target, root, out, p, repeats, run_point, code, progress, len(points),
                                       failures)
            reused += not ran and record is not None
            if record is not None:
                records.append(record)
            progress.advance(task)
    write_points_csv(out / "points.csv", records)
    png = draw(target, records, out / f"{target.id}.png", quick=quick)
    judged = judge_all(target, records)
    claims = [c for c, x in zip(judged, target.claims) if x.role == "claim"]
    checks = [c for c, x in zip(judged, target.claims) if x.role == "calibration"]
    form = target.form(quick)
    calibration = None if scale is None else {"describe": scale.describe(), "scale": scale.scale,
                                              "source": scale.entry.source, "kind": scale.entry.kind}
    own = list({p.calibration.describe(): p.calibration for p in points if p.calibration is not None}.values())
    if scale is None and own:  # calibration_gpu: a row per point (each model its own)
        calibration = {"describe": "; ".join(s.describe() for s in own), "scale": None,
                       "source": " | ".join(f"{s.entry.model}/{s.entry.gpu}/b{s.entry.batch_size}: "
                                            f"{s.entry.source.strip()}" for s in own),
                       "kind": ", ".join(sorted({s.entry.kind for s in own}))}
    verdict = {
        "target": target.id, "paper": target.paper, "figure": target.figure, "title": target.title,
        "compares": target.compares, "setting": target.setting,
        "engine": "mixed" if target.mixed else target.engine,
        "engines": {r["id"]: r.get("engine", target.engine) for r in records},
        "form": "quick" if quick else "full", "axes": form.axes,
        "command": f"synclab reproduce {target.id}{' --quick' if quick else ''}",
        "calibration": calibration,
        "startup_s": target.startup_s,
        "points": len(points), "points_reused": reused, "failures": failures,
        "dilation": {r["id"]: r["dilation"] for r in records}, "max_dilation": max_dilation,
        "limit": limit, "repeats": max((r.get("repeats", 1) for r in records), default=1),
        "host_seconds": sum(r["host_seconds"] for r in records), "estimate_s": form.estimate_s,
        "full_form": {"command": f"synclab reproduce {target.id}", "axes": target.full.axes,
                      "set": target.full.set, "estimate_s": target.full.estimate_s},
        "claims": claims, "calibration_checks": checks,
        "verdict": verdict_of(claims, checks) if not failures else "failed",
        "figure_file": png.name, "notes": target.notes,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        # a repeated point's record joins its repeats' codes with ", "
        "code": sorted({c for r in records for c in str(r.get("code", "unknown")).split(", ")}),
    }
    write_atomic(out / "verdict.json", verdict_text(verdict))
    return verdict


def _run_repeats(target: Target, root: Path, out: Path, p: Point, repeats: int, run_point: PointRunner | None,
                 code: str, progress, total: int, failures: list[str]) -> tuple[dict | None, bool]:
    """Every repeat of point ``p`` (kept when recorded before, else run); (the merged record or None when no
    repeat succeeded, whether any repeat ran now)."""
    n = max(repeats, _repeats_on_disk(out, p)) if p.engine == "emulate" else 1
    reps, ran = [], False
    for k in range(1, n + 1):
        run_dir = repeat_dir(out, p, k)
        label = f"  point {p.index + 1}/{total} {p.id}" + (f" (repeat {k}/{n})" if n > 1 else "")
        record = _load_record(run_dir / "record.json", p)
        if record is not None:
            progress.console.print(f"{label}: done before, kept")
            reps.append(record)
            continue
        if k == 1:
            for note in p.notes:
                progress.console.print(f"{label}: {note}")
        run_dir.mkdir(parents=True, exist_ok=True)
        ran, t0 = True, time.monotonic()
        try:
            result = (run_point or RUNNERS[p.engine])(target, root, p, run_dir, progress.console.print)
        except Exception as e:  # a failed point is reported; the others still run
            failures.append(f"{p.id}" + (f" (repeat {k})" if n > 1 else "") + f": {e}")
            progress.console.print(f"  [red]point {p.id} failed:[/] {e}")
            continue
        record = {"id": p.id, "values": p.values, "overrides": p.overrides, "engine": p.engine,
                  "dilation": p.dilation, "notes": p.notes, "host_seconds": time.monotonic() - t0,
                  "host_load": round(os.getloadavg()[0], 2), "code": code, "repeat": k, **result}
        write_atomic(run_dir / "record.json", json.dumps(record, indent=1, default=str) + "\n")
        reps.append(record)
    return (merge_repeats(reps) if reps else None), ran
