"""Soak: every strategy's quick-start run repeated N times in a row; failures per strategy.

Each repeat is ``synclab run examples/quickstart.yaml`` (the user's own path, a
fresh process, shaped links as the quick start chooses them) with
``run.iterations=6 run.warmup=0`` unless ``--set`` says otherwise. A run that
exits non-zero is a failure; its first error line is kept. For ``mgwfbp`` and
``mgwfbp-opt`` the fitted T(M) = a + b·M (plan.json) is recorded too, so the
range the live fit takes over repeats is visible.

    python benchmarks/soak.py [--strategies mgwfbp,mgwfbp-opt] [--repeats 10] [--out runs/soak]
        [--set run.iterations=6 ...] [--keep-runs]

Writes ``outcomes.csv`` and ``summary.json`` into --out; prints a table. Not in CI
(minutes per strategy); exits 1 if any run failed.
"""

from __future__ import annotations

import argparse
import csv
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_SETS = ("run.iterations=6", "run.warmup=0")


def registered_strategies() -> list[str]:
    from synclab.strategies.registry import names

    return sorted(names())


def first_error_line(text: str) -> str:
    """The line a user would read first: the CLI's own failure message, else the last non-empty line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    for ln in lines:
        if ln.startswith(("run failed", "run error", "invalid spec", "could not start")) or "Error" in ln:
            return ln[:300]
    return lines[-1][:300] if lines else ""


def failure_reason(run_dir: Path) -> str:
    """status.json's reason, and the first exception line any node logged (the cause, not the symptom)."""
    status = run_dir / "status.json"
    reason = json.loads(status.read_text()).get("reason", "") if status.exists() else ""
    for log in sorted((run_dir / "logs").glob("*.log")):
        for line in log.read_text(errors="replace").splitlines():
            if line.strip().startswith(("Traceback",)):
                continue
            if "Error:" in line or "Exception:" in line:
                return f"{reason} — {log.stem}: {line.strip()[:200]}" if reason else line.strip()[:200]
    return reason


def soak_once(strategy: str, repeat: int, out: Path, sets: list[str]) -> dict:
    run_dir = out / "runs" / f"{strategy}-{repeat:03d}"
    cmd = [sys.executable, "-m", "synclab", "run", str(REPO / "examples" / "quickstart.yaml"), "--out",
           str(run_dir), "--no-report", "--set", f"strategy.name={strategy}"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    row = {"strategy": strategy, "repeat": repeat, "ok": r.returncode == 0, "exit": r.returncode,
           "seconds": round(time.perf_counter() - t0, 2), "error": "", "fit_a": "", "fit_b": "", "fit_r2": ""}
    if r.returncode != 0:
        row["error"] = failure_reason(run_dir) or first_error_line(r.stdout + "\n" + r.stderr)
    plan = run_dir / "plan.json"
    if plan.exists():
        fit = json.loads(plan.read_text()).get("cost_fit") or {}
        row.update(fit_a=fit.get("a", ""), fit_b=fit.get("b", ""), fit_r2=fit.get("r2", ""))
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--strategies", default="", help="comma-separated (default: every registered strategy)")
    ap.add_argument("--repeats", type=int, default=10)
    ap.add_argument("--out", type=Path, default=Path("runs/soak"))
    ap.add_argument("--set", dest="sets", action="append", default=[],
                    help=f"spec override for every run (default {' '.join(DEFAULT_SETS)})")
    ap.add_argument("--keep-runs", action="store_true", help="keep every run directory (default: failures only)")
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be >= 1")
    known = registered_strategies()
    strategies = [s for s in args.strategies.split(",") if s] or known
    unknown = sorted(set(strategies) - set(known))
    if unknown:
        ap.error(f"unknown strategies {unknown}; registered: {known}")
    sets = list(DEFAULT_SETS) + args.sets

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
    from rich.table import Table

    console = Console(width=160)
    args.out.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  console=console) as progress:
        task = progress.add_task("soak", total=len(strategies) * args.repeats)
        for strategy in strategies:
            for repeat in range(args.repeats):
                progress.update(task, description=f"{strategy} #{repeat + 1}")
                row = soak_once(strategy, repeat, args.out, sets)
                rows.append(row)
                if row["ok"] and not args.keep_runs:
                    shutil.rmtree(args.out / "runs" / f"{strategy}-{repeat:03d}", ignore_errors=True)
                if not row["ok"]:
                    progress.console.print(f"[red]{strategy} #{repeat + 1} failed[/]: {row['error']}")
                progress.advance(task)
    with (args.out / "outcomes.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    summary = {}
    table = Table(title=f"soak: {args.repeats} repeats, {' '.join(sets)}")
    for col in ("strategy", "runs", "failures", "s/run (median)", "fit a (s)", "fit b (s/byte)", "first error"):
        table.add_column(col)
    for strategy in strategies:
        mine = [r for r in rows if r["strategy"] == strategy]
        failed = [r for r in mine if not r["ok"]]
        secs = sorted(r["seconds"] for r in mine)
        a = [r["fit_a"] for r in mine if r["fit_a"] != ""]
        b = [r["fit_b"] for r in mine if r["fit_b"] != ""]
        summary[strategy] = {"runs": len(mine), "failures": len(failed), "median_seconds": secs[len(secs) // 2],
                             "errors": [r["error"] for r in failed],
                             "fit_a_range": [min(a), max(a)] if a else None,
                             "fit_b_range": [min(b), max(b)] if b else None}
        table.add_row(strategy, str(len(mine)), str(len(failed)), f"{secs[len(secs) // 2]:.1f}",
                      f"{min(a):.2e}–{max(a):.2e}" if a else "", f"{min(b):.2e}–{max(b):.2e}" if b else "",
                      failed[0]["error"] if failed else "")
    (args.out / "summary.json").write_text(json.dumps({"sets": sets, "repeats": args.repeats,
                                                       "strategies": summary}, indent=1) + "\n")
    console.print(table)
    console.print(f"outcomes: {args.out / 'outcomes.csv'}")
    sys.exit(1 if any(not r["ok"] for r in rows) else 0)


if __name__ == "__main__":
    main()
