"""``docs/results/reproduction.md`` from the targets' ``verdict.json`` files — every number in it comes from
a run's verdict, none is typed: a one-screen summary table, then one section per target (setting,
paper vs SyncLab table, verdict and why, host time, figure). The records it is built from are checked in
under ``docs/reproduction/<target>-<form>/`` (:data:`RECORDS`)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any

from synclab.fileio import write_atomic
from synclab.reproduce.verdict import VERDICTS

DOC = Path("docs/results/reproduction.md")  # the page, relative to the repository root
RECORDS = Path("docs/reproduction")  # the checked-in records it is built from, relative to the root


def _num(v: Any) -> str:
    if v is None:
        return "—"
    return f"{float(v):.3g}"


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def record_dir(records: Path, target: str, form: str) -> Path:
    """Where the checked-in record of a target's form lives: ``<records>/<target>-<form>/``."""
    return records / f"{target}-{form}"


def _rank(d: Path) -> tuple[bool, str]:
    """A run's claim to be the documented one: a complete run (not a ``--points``/``--max-dilation`` smoke)
    before a smoke, then the newest."""
    v = json.loads((d / "verdict.json").read_text())
    return (not (v.get("limit") or v.get("max_dilation")), v.get("written", ""))


def archive(run: Path, dest: Path) -> Path:
    """Copy a run's ``verdict.json``, ``points.csv`` and figure into ``dest`` (the record the doc is built
    from, checked in so that a fresh clone regenerates the same doc); returns ``dest``."""
    v = json.loads((run / "verdict.json").read_text())
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "repeats.csv").unlink(missing_ok=True)  # an older record's repeats are not this run's
    for name in ("verdict.json", "points.csv", "repeats.csv", v["figure_file"]):
        if (run / name).exists():
            shutil.copyfile(run / name, dest / name)
    return dest


def gather(target: str, runs: dict[str, Path], records: Path) -> Path | None:
    """The directory documenting ``target``: its full form when one was run, else its quick form; of a form's
    local run (``runs[form]``) and its checked-in record, the better by :func:`_rank`. A local run that wins is
    archived into the record first. ``None`` when neither form has a verdict anywhere."""
    for form in ("full", "quick"):
        record = record_dir(records, target, form)
        have = [d for d in (runs[form], record) if (d / "verdict.json").exists()]
        if have:
            best = max(have, key=_rank)  # max keeps the first of equals: the local run
            return best if best == record else archive(best, record)
    return None


def best_record(records: Path, target: str) -> Path | None:
    """The checked-in record documenting ``target``: its full form's when there is one, else its quick one's."""
    for form in ("full", "quick"):
        d = record_dir(records, target, form)
        if (d / "verdict.json").exists():
            return d
    return None


def documented(root: Path, targets: list) -> tuple[list[tuple[dict[str, Any], Path]], list[str]]:
    """(verdict, record) of every target with a checked-in record under ``root``, and the ids of those
    without one: what the page shows when no local run is newer than its record."""
    found = collect([d for d in (best_record(root / RECORDS, t.id) for t in targets) if d is not None])
    have = {v["target"] for v, _ in found}
    return found, [t.id for t in targets if t.id not in have]


def collect(out_dirs: list[Path]) -> list[tuple[dict[str, Any], Path]]:
    """(verdict, its directory) for every directory that has a verdict.json, by target id."""
    found = [(json.loads((d / "verdict.json").read_text()), d) for d in out_dirs if (d / "verdict.json").exists()]
    return sorted(found, key=lambda vd: vd[0]["target"])


SHOWN = ("iteration_s", "iteration_s_spread", "repeats", "compute_s", "comm_wait_s", "throughput", "speedup",
         "fit_a_s", "fit_b_s_per_byte",
         "smallest_allreduce_s", "merged_groups", "servers", "dilation")


def _points_table(out: Path, axes: list[str]) -> list[str]:
    """The measured points (from points.csv) with the metrics that explain the verdicts."""
    import csv

    path = out / "points.csv"
    if not path.exists():
        return []
    with path.open() as f:
        rows = list(csv.DictReader(f))
    cols = [c for c in SHOWN if any(r.get(c) not in (None, "") for r in rows)]
    load = any(r.get("host_load") for r in rows)  # the host's load at a point's end (newer records only)
    busy = any(r.get("host_busy") for r in rows)  # how busy its cores were (emulated points from 2026-11-27 on)
    tail = ["host s", *(["load"] if load else []), *(["busy"] if busy else [])]
    lines = ["Measured points (`points.csv`; times in emulated or simulated seconds"
             + ("; load: the host's 1-minute load average when the point ended, 2 cores" if load else "")
             + ("; busy: the share of the host's cores busy over an emulated point's measured iterations" if busy
                else "") + "):",
             "", "| " + " | ".join([*axes, *cols, *tail]) + " |", "|" + "---|" * (len(axes) + len(cols) + len(tail))]
    for r in rows:
        host = [*([r.get("host_load") or "—"] if load else []),
                *([f"{float(r['host_busy']):.0%}" if r.get("host_busy") else "—"] if busy else [])]
        lines.append("| " + " | ".join([*(r[a] for a in axes), *(_num(r[c]) if r[c] else "—" for c in cols),
                                        r["host_seconds"], *host]) + " |")
    return lines + [""]


def _time_note(v: dict[str, Any]) -> str:
    """Which clock the points ran on: simulated, the model, or emulated with the dilations used (or, for a
    target with per-point engines, which points were emulated and which simulated)."""
    rule = "(rule: concurrent emulated traffic / D ≤ 1.5 Gbit/s)"
    if v.get("max_dilation"):
        rule = (f"(the rule's D capped at {v['max_dilation']} by `--max-dilation`: a smoke run, the host overloaded, "
                f"times not to be trusted)")
    if v.get("engine") == "mixed":
        engines = v.get("engines", {})
        emu = sorted({v["dilation"][k] for k, e in engines.items() if e == "emulate"})
        sim = [k for k, e in engines.items() if e == "simulate"]
        return (f"emulated points with dilation D = {', '.join(str(d) for d in emu) or '-'} {rule}; simulated "
                f"points ({', '.join(f'`{k}`' for k in sim) or 'none'}) on the simulated clock")
    if v.get("engine") == "simulate":
        return "simulated clock (no dilation)"
    if v.get("engine") == "model":
        return "Stanza's performance models eq. 2-7 evaluated (no clock)"
    return f"dilation D = {', '.join(str(d) for d in sorted(set(v['dilation'].values())))} {rule}"


def _claims_table(claims: list[dict[str, Any]], what: str) -> list[str]:
    """Paper vs SyncLab, one row per claim (or calibration check)."""
    lines = [f"| {what} | source | paper | SyncLab | verdict |", "|---|---|---|---|---|"]
    for c in claims:
        unit = f" {c['unit']}" if c.get("unit") else ""
        value, settled = _num(c["synclab_value"]), ""
        if c.get("repeats"):  # judged on the repeats' means; the range and how many repeats agree beside it
            r = c["repeats"]
            value += f" ({_num(min(r['values']))}–{_num(max(r['values']))})"
            settled = f" ({r['agree']}/{len(r['values'])} repeats)"
        paper = _num(c["paper_value"])
        if c.get("paper_value_compared") is not None:  # carried to SyncLab's N (MG-WFBP Table 2)
            paper += f" → {_num(c['paper_value_compared'])}"
        lines.append(f"| {c['id']}: “{c['quote']}” | {c['source']} | {paper}{unit} | "
                     f"{value}{unit} | **{c['verdict']}**{settled} |")
    return lines + [""]


COUNTED = VERDICTS


def counts(claims: list[dict[str, Any]]) -> list[int]:
    """How many of ``claims`` have each verdict of :data:`COUNTED`, in that order."""
    return [sum(c["verdict"] == k for c in claims) for k in COUNTED]


def _changes(v: dict[str, Any]) -> list[str]:
    """The "what changed" table of a target's last re-judge (``rejudge.rejudge``'s record): each claim whose
    verdict (or role) moved, before -> after, and the new judge's reason."""
    r = v.get("rejudged")
    if not r:
        return []
    lines = ["", f"**What changed at the re-judge** (judge `{r['judge']}`, {r['written']}; target verdict "
                 f"{r['verdict_before']} → {v['verdict']}):", ""]
    if not r["changes"]:
        return lines + ["No claim's verdict moved.", ""]
    lines += ["| claim | before | after | why |", "|---|---|---|---|"]
    for c in r["changes"]:
        after = c["after"] + (" (calibration check)" if c.get("role") == "calibration" else "")
        lines.append(f"| `{c['id']}` | {c['before'] or '—'} | **{after}** | {c['why']} |")
    return lines + [""]


def _totals(found: list[tuple[dict[str, Any], Path]]) -> list[str]:
    """Claims by verdict over every documented target, before the last re-judge and now."""
    if not any(v.get("rejudged") for v, _ in found):
        return []
    now = [0] * len(COUNTED)
    before = [0] * len(COUNTED)
    for v, _ in found:
        now = [a + b for a, b in zip(now, counts(v["claims"]))]
        r = v.get("rejudged")
        was = [r["counts_before"]["claims"].get(k, 0) for k in COUNTED] if r else counts(v["claims"])
        before = [a + b for a, b in zip(before, was)]
    names = " / ".join(COUNTED)
    return [f"Claims {names}, all targets: before the last re-judge **{' / '.join(map(str, before))}** of "
            f"{sum(before)}; now **{' / '.join(map(str, now))}** of {sum(now)} (calibration checks are no longer "
            f"counted; each target's \"What changed\" table says why).", "",
            "| target | verdict before → after | claims moved (before → after) |", "|---|---|---|"] + [
        f"| `{v['target']}` | {v['rejudged']['verdict_before']} → {v['verdict']} | "
        + (", ".join(f"{c['id']} {c['before'] or '—'} → {c['after']}"
                     + (" (check)" if c.get("role") == "calibration" else "") for c in v["rejudged"]["changes"])
           or "none") + " |"
        for v, _ in found if v.get("rejudged")] + [""]


def _section(v: dict[str, Any], figure: str | None, out: Path) -> list[str]:
    lines = [f"## {v['paper']} {v['figure']} — {v['title']} (`{v['target']}`, {v['form']} form)", "",
             f"**Compares:** {v['compares']}", "", f"**Setting:** {v['setting']}", ""]
    if v.get("calibration"):
        c = v["calibration"]
        lines += [f"**Calibration:** {c['describe']} ({c['kind']}: {c['source'].strip()})", ""]
    if v.get("startup_s") is not None:
        lines += [f"**Simulated per-message start-up:** {v['startup_s'] * 1e6:.3g} µs", ""]
    axes = "; ".join(f"`{k}` ∈ {{{', '.join(str(x) for x in vals)}}}" for k, vals in v["axes"].items())
    time_note = _time_note(v)
    lines += [f"**Points ({v['form']} form):** {axes} — {v['points']} points, {time_note}. "
              f"Host time {_minutes(v['host_seconds'])} (estimate {_minutes(v['estimate_s'])}); "
              f"command `{v['command']}`; code {', '.join(f'`{c}`' for c in v.get('code', ['not recorded']))}, "
              f"written {v.get('written', '?')}.", ""]
    full = v.get("full_form")
    if v["form"] == "quick" and full:
        axes = "; ".join(f"`{k}` ∈ {{{', '.join(str(x) for x in vals)}}}" for k, vals in full["axes"].items())
        extra = f" with {', '.join(f'`{x}`' for x in full['set'])}" if full["set"] else ""
        lines += [f"**Full form (not run yet):** `{full['command']}` — {axes}{extra}; estimated host time "
                  f"{_minutes(full['estimate_s'])}.", ""]
    checks = v.get("calibration_checks", [])
    if v["claims"]:
        lines += _claims_table(v["claims"], "claim")
    if checks:
        lines += ["Calibration checks (a setting against the number it was set from; not counted as claims):", ""]
        lines += _claims_table(checks, "check")
    lines += _points_table(out, list(v["axes"]))
    lines += [f"**Verdict: {v['verdict']}.**", ""]
    for c in [*v["claims"], *checks]:
        lines.append(f"* `{c['id']}` — {c['verdict']}: {c['why']}")
    lines += _changes(v)
    if v.get("failures"):
        lines += ["", "Failed points: " + "; ".join(v["failures"])]
    for n in v.get("notes", []):
        lines.append(f"* Note: {n.strip()}")
    if figure:
        lines += ["", f"![{v['target']}]({figure})"]
    return lines + [""]


def render_text(found: list[tuple[dict[str, Any], Path]], doc: Path, *, missing: list[str] = ()) -> str:
    """The page for ``doc`` (written nowhere): figures are linked relative to ``doc``'s directory."""
    quick = any(v["form"] == "quick" for v, _ in found)
    lines = ["# Reproducing the papers with SyncLab", "",
             "Generated by `synclab reproduce --doc` (or `synclab docs`) from the `verdict.json` of each target's "
             f"last run, kept under `{RECORDS.as_posix()}/<target>-<form>/` with its `points.csv` and figure; do "
             "not edit by hand. How far the compute calibration's model-to-model ratios carry one paper-given time "
             "to another: [the held-out check](calibration-check.md) (`synclab reproduce --calibration-check`).", ""]
    if quick:
        lines += ["> **Quick-form results.** Rows marked *quick* come from the reduced sweeps "
                  "(`synclab reproduce TARGET --quick`): fewer points and iterations than the paper. "
                  "The full forms (`synclab reproduce TARGET`) have not been run yet for those rows.", ""]
    lines += ["| target | paper, figure | form | claims reproduced / partly / not / tie / not run | "
              "calibration checks (same order) | verdict | host time |",
              "|---|---|---|---|---|---|---|"]
    total, total_checks = [0] * len(COUNTED), [0] * len(COUNTED)
    for v, _ in found:
        n, k = counts(v["claims"]), counts(v.get("calibration_checks", []))
        total = [a + b for a, b in zip(total, n)]
        total_checks = [a + b for a, b in zip(total_checks, k)]
        lines.append(f"| [`{v['target']}`](#{anchor(v)}) | {v['paper']} {v['figure']} | {v['form']} | "
                     f"{' / '.join(str(x) for x in n)} | {' / '.join(str(x) for x in k) if any(k) else '—'} | "
                     f"**{v['verdict']}** | {_minutes(v['host_seconds'])} |")
    lines.append(f"| **all** | | | **{' / '.join(str(x) for x in total)}** of {sum(total)} | "
                 f"{' / '.join(str(x) for x in total_checks)} of {sum(total_checks)} | | |")
    lines += [""] + _totals(found)
    if missing:
        lines += ["", "Targets defined but without a verdict yet: " + ", ".join(f"`{m}`" for m in missing) + "."]
    lines.append("")
    for v, d in found:
        png = (d / v["figure_file"]).resolve()
        figure = Path(os.path.relpath(png, doc.parent.resolve())).as_posix() if png.exists() else None
        lines += _section(v, figure, d)
    return "\n".join(lines)


def render(found: list[tuple[dict[str, Any], Path]], doc: Path, *, missing: list[str] = ()) -> str:
    """Write ``doc`` (:func:`render_text`); returns the text."""
    text = render_text(found, doc, missing=missing)
    doc.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(doc, text)
    return text


def anchor(v: dict[str, Any]) -> str:
    """The GitHub-style anchor of a target's section in the page."""
    import re

    title = f"{v['paper']} {v['figure']} — {v['title']} (`{v['target']}`, {v['form']} form)"
    return re.sub(r"[^a-z0-9 _-]", "", title.lower()).replace(" ", "-")
