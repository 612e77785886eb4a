"""The one sweep runner every reproduction target uses.

For each point of the chosen form (quick or full) it runs the emulator or the simulator into
``OUT/points/<point-id>/`` and keeps the point's metrics in ``record.json`` there; a point whose
record exists with the same overrides is kept and skipped (resumable). Then it writes
``OUT/points.csv``, ``OUT/<target>.png`` and ``OUT/verdict.json``.
"""

from __future__ import annotations

import csv
import json
import subprocess
import time
from pathlib import Path
from typing import Any, Callable

from synclab.reproduce.calibration import Scale, compute_scale, load_calibration
from synclab.reproduce.figure import draw
from synclab.reproduce.points import RUNNERS, Point, expand
from synclab.reproduce.schema import Target
from synclab.reproduce.verdict import judge, summarize

PointRunner = Callable[[Target, Path, Point, Path, Callable[[str], None]], dict]


def calibrate(target: Target, root: Path) -> Scale | None:
    if target.calibration is None:
        return None
    c = target.calibration
    table = load_calibration(root / "profiles" / "calibration.yaml")
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


def _load_record(path: Path, point: Point) -> dict | None:
    if not path.exists():
        return None
    record = json.loads(path.read_text())
    return record if record.get("overrides") == point.overrides else None


def write_points_csv(path: Path, records: list[dict[str, Any]]) -> None:
    axis = list(dict.fromkeys(k for r in records for k in r["values"]))
    metrics = list(dict.fromkeys(k for r in records for k in r["metrics"]))
    with path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["point", *axis, *metrics, "host_seconds"])
        for r in records:
            w.writerow([r["id"], *(r["values"].get(k, "") for k in axis),
                        *("" if r["metrics"].get(k) is None else r["metrics"][k] for k in metrics),
                        f"{r['host_seconds']:.1f}"])


def read_points_csv(path: Path) -> list[dict[str, str]]:
    with path.open() as f:
        return list(csv.DictReader(f))


def _judge(claim, rows: list[dict[str, Any]]) -> dict[str, Any]:
    try:
        return judge(claim, rows)
    except ValueError as e:  # a metric the points do not have: say so rather than stop the whole target
        return {"id": claim.id, "quote": claim.quote, "source": claim.source, "paper_value": claim.paper_value,
                "unit": claim.unit, "synclab_value": None, "verdict": "not run", "why": str(e)}


def run_target(target: Target, root: Path, out: Path, *, quick: bool, extra: list[str] = (),
               run_point: PointRunner | None = None, console=None, limit: int | None = None,
               max_dilation: int | None = None) -> dict[str, Any]:
    """Run (or resume) one target; returns the verdict written to ``out/verdict.json``.

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
            run_dir = out / "points" / p.id
            path = run_dir / "record.json"
            record = _load_record(path, p)
            if record is not None:
                reused += 1
                progress.console.print(f"  point {p.index + 1}/{len(points)} {p.id}: done before, kept")
            else:
                for note in p.notes:
                    progress.console.print(f"  point {p.index + 1}/{len(points)} {p.id}: {note}")
                run_dir.mkdir(parents=True, exist_ok=True)
                t0 = time.monotonic()
                try:
                    result = (run_point or RUNNERS[p.engine])(target, root, p, run_dir, progress.console.print)
                except Exception as e:  # a failed point is reported; the others still run
                    failures.append(f"{p.id}: {e}")
                    progress.console.print(f"  [red]point {p.id} failed:[/] {e}")
                    progress.advance(task)
                    continue
                record = {"id": p.id, "values": p.values, "overrides": p.overrides, "engine": p.engine,
                          "dilation": p.dilation, "notes": p.notes, "host_seconds": time.monotonic() - t0,
                          "code": code, **result}
                path.write_text(json.dumps(record, indent=1, default=str) + "\n")
            records.append(record)
            progress.advance(task)
    write_points_csv(out / "points.csv", records)
    rows = [{**r["values"], **r["metrics"]} for r in records]
    png = draw(target, records, out / f"{target.id}.png", quick=quick)
    claims = [_judge(c, rows) for c in target.claims]
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
        "limit": limit,
        "host_seconds": sum(r["host_seconds"] for r in records), "estimate_s": form.estimate_s,
        "full_form": {"command": f"synclab reproduce {target.id}", "axes": target.full.axes,
                      "set": target.full.set, "estimate_s": target.full.estimate_s},
        "claims": claims, "verdict": summarize(claims) if not failures else "failed",
        "figure_file": png.name, "notes": target.notes,
        "written": time.strftime("%Y-%m-%d %H:%M:%S"),
        "code": sorted({r.get("code", "unknown") for r in records}),
    }
    (out / "verdict.json").write_text(json.dumps(verdict, indent=1, default=str) + "\n")
    return verdict
