"""``synclab reproduce``: list, run and document the paper-reproduction targets.

The targets ship in the package (``synclab/reproduce/targets/``); ``--targets DIR`` adds a user's own
(first, so one of the same id shadows the stock one). Runs go to ``runs/reproduce/`` of the checkout the
working directory is in, else of the working directory itself."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from synclab.fileio import write_atomic

console = Console(stderr=True)


def _fail(message: str) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(2)


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def reproduce(target: Optional[str] = typer.Argument(None, help="Target id (see --list)."),
              list_: bool = typer.Option(False, "--list", help="List the targets and exit."),
              quick: bool = typer.Option(False, "--quick", help="Run the target's quick form (fewer points)."),
              out: Optional[Path] = typer.Option(None, "--out", help="Output directory "
                                                 "(default runs/reproduce/TARGET[-quick]); resumable."),
              set_: list[str] = typer.Option([], "--set", help="Extra spec override KEY=VALUE for every point."),
              points: Optional[int] = typer.Option(None, "--points", min=1, help="Run only the form's first N "
                                                   "points (a smoke run; claims needing the others are 'not run')."),
              max_dilation: Optional[int] = typer.Option(None, "--max-dilation", min=1, help="Cap each emulated "
                                                         "point's dilation at N (a smoke run: above the rule's D "
                                                         "the host is overloaded and times are not to be trusted)."),
              repeats: int = typer.Option(1, "--repeats", min=1, help="Run each emulated point N times (at "
                                          "least: repeats measured before are kept); its metrics are their mean, "
                                          "and each claim says in how many repeats it gets the same verdict."),
              doc: bool = typer.Option(False, "--doc", help="Write docs/results/reproduction.md: each target's full "
                                       "form when run, else its quick one; a run in runs/reproduce/ newer than "
                                       "its record in docs/reproduction/ replaces that record first."),
              all_: bool = typer.Option(False, "--all", help="Run every target's form (--quick for the quick "
                                        "ones), cheapest first, each resuming its points, then write the doc "
                                        "as --doc does."),
              own_targets: list[Path] = typer.Option([], "--targets", help="A directory of your own target "
                                                     "files, read before the packaged ones (repeatable)."),
              only_own: bool = typer.Option(False, "--only-own", help="Read only the --targets directories, not "
                                            "the packaged targets."),
              rejudge_: bool = typer.Option(False, "--rejudge", help="Judge the checked-in records again (TARGET's, "
                                            "or every target's) from their points.csv with this checkout's judge, "
                                            "running nothing; rewrite their verdict.json (with what changed) and "
                                            "the document."),
              calibration_check: bool = typer.Option(False, "--calibration-check", help="Write the held-out check "
                                                     "of the compute calibration (docs/results/calibration-check.md): "
                                                     "each paper-given time predicted from the others through GPU "
                                                     "and CPU profile ratios. Runs nothing, changes no calibration.")):
    """Reproduce a paper figure: run its sweep, draw it beside the paper's numbers, judge each claim."""
    from synclab.reproduce.schema import TargetError, load_target, target_dirs, target_files
    from synclab.resources import checkout as find_checkout

    checkout = find_checkout()
    root = checkout or Path.cwd()
    try:
        files = target_files(list(own_targets) if only_own else target_dirs(own_targets))
        targets = [load_target(p) for p in files.values()]
    except TargetError as e:
        _fail(str(e))
    if list_:
        from rich.table import Table

        t = Table(title="reproduction targets")
        for col in ("target", "paper", "figure", "compares", "engine", "quick", "full"):
            t.add_column(col)
        for x in targets:
            t.add_row(x.id, x.paper, x.figure, x.compares, "emulate+simulate" if x.mixed else x.engine,
                      f"{len(_points(x.quick))} pts, ~{_minutes(x.quick.estimate_s)}",
                      f"{len(_points(x.full))} pts, ~{_minutes(x.full.estimate_s)}")
        Console(width=160).print(t)
        return
    if all_:
        failed = []
        for x in sorted(targets, key=lambda x: (x.quick if quick else x.full).estimate_s):
            console.rule(f"{x.id} ({'quick' if quick else 'full'} form)")
            if _run_one(x, root, None, quick, set_, points, max_dilation, repeats)["failures"]:
                failed.append(x.id)
        if checkout is not None:
            _write_doc(checkout, targets)
        else:
            console.print("not in a checkout: docs/results/reproduction.md is not written (the runs are in "
                          "runs/reproduce/)")
        if failed:
            _fail(f"points failed in: {', '.join(failed)}")
        return
    if calibration_check:
        _calibration_check(checkout)
        return
    if rejudge_:
        if target is not None and target not in files:
            _fail(f"no target {target!r}; have: {', '.join(x.id for x in targets)}")
        _rejudge(checkout, [x for x in targets if target is None or x.id == target])
        _write_doc(checkout, targets)
        return
    if doc:
        _write_doc(checkout, targets)
        return
    if target is None:
        _fail("name a TARGET, or use --list / --doc / --all")
    if target not in files:
        _fail(f"no target {target!r}; have: {', '.join(x.id for x in targets)}")
    if _run_one(load_target(files[target]), root, out, quick, set_, points, max_dilation, repeats)["failures"]:
        raise typer.Exit(1)


def _rejudge(root: Path | None, targets: list) -> None:
    """Re-judge each target's checked-in records (full and quick) and print what moved."""
    from synclab.reproduce.doc import RECORDS, record_dir
    from synclab.reproduce.rejudge import judge_version, rejudge

    if root is None:
        _fail("the checked-in records belong to a checkout: run --rejudge inside one")
    done, judge = 0, judge_version()  # before any record is rewritten
    for x in targets:
        for form in ("full", "quick"):
            d = record_dir(root / RECORDS, x.id, form)
            if not (d / "verdict.json").exists():
                continue
            try:
                v = rejudge(x, d, judge)
            except (ValueError, OSError) as e:
                console.print(f"[bold red]error:[/] {x.id} ({form}): {e}")
                raise typer.Exit(1)
            done += 1
            moved = v.get("rejudged", {}).get("changes", [])
            console.print(f"{x.id} ({form}): {v['verdict']}" + (f"; {len(moved)} verdict(s) moved at the last "
                                                                 f"re-judge" if moved else ""))
    if not done:
        _fail("no checked-in record to re-judge" + (f" for {targets[0].id}" if len(targets) == 1 else ""))


def _calibration_check(root: Path | None) -> None:
    """docs/results/calibration-check.md (``reproduce.heldout``); outside a checkout, the text on stdout."""
    from synclab.reproduce.heldout import page

    text = page(root or Path.cwd())
    if root is None:
        print(text)
        return
    out = root / "docs" / "results" / "calibration-check.md"
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, text)
    console.print(f"wrote {out}")


def _write_doc(root: Path | None, targets: list) -> None:
    """docs/results/reproduction.md from each target's best run or checked-in record (``doc.gather``)."""
    from synclab.reproduce.doc import DOC, RECORDS, collect, gather, render
    from synclab.reproduce.runner import default_out

    if root is None:
        _fail("the reproduction document belongs to a checkout: run --doc inside one (no pyproject.toml and "
              "docs/ here or above)")
    path = root / DOC
    dirs = [gather(x.id, {"full": default_out(root, x, False), "quick": default_out(root, x, True)},
                   root / RECORDS) for x in targets]
    found = collect([d for d in dirs if d is not None])
    have = {v["target"] for v, _ in found}
    render(found, path, missing=[x.id for x in targets if x.id not in have])
    console.print(f"wrote {path} ({len(found)} target(s) with a verdict)")


def _run_one(t, root: Path, out: Optional[Path], quick: bool, set_: list[str], points: Optional[int],
             max_dilation: Optional[int], repeats: int = 1) -> dict:
    """Run (or resume) one target's form and print its claims; returns the verdict."""
    from rich.table import Table

    from synclab.config.spec import SpecError
    from synclab.reproduce.runner import default_out, run_target

    out_dir = out or default_out(root, t, quick)
    try:
        v = run_target(t, root, out_dir, quick=quick, extra=list(set_), console=console, limit=points,
                       max_dilation=max_dilation, repeats=repeats)
    except SpecError as e:  # a point's settings (the target's or --set) do not make a valid spec
        _fail(f"{t.id}: a point's spec is invalid: {e}")
    table = Table(title=f"{t.paper} {t.figure} ({v['form']} form): {v['verdict']}")
    for col in ("claim", "paper", "SyncLab", "verdict"):
        table.add_column(col)
    checks = [(c, " (calibration)") for c in v.get("calibration_checks", [])]
    for c, role in [*((c, "") for c in v["claims"]), *checks]:
        s = "—" if c["synclab_value"] is None else f"{c['synclab_value']:.3g}"
        agree = f" ({c['repeats']['agree']}/{len(c['repeats']['values'])})" if c.get("repeats") else ""
        table.add_row(c["id"] + role, f"{c['paper_value']:.3g} {c['unit']}", f"{s} {c['unit']}",
                      c["verdict"] + agree)
    Console(width=140).print(table)
    console.print(f"{out_dir}: points.csv, {v['figure_file']}, verdict.json ({v['points_reused']} of "
                  f"{v['points']} points kept from before; host {_minutes(v['host_seconds'])})")
    return v


def _points(form) -> list:
    n = 1
    for values in form.axes.values():
        n *= len(values)
    return [None] * n
