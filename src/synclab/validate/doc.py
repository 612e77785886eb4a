"""``docs/results/validation.md`` from the checked-in validation records: the simulator against the emulator.

Every ``docs/validation/NAME/sim-vs-emu.json`` (written by ``synclab validate grid --record NAME``: the command,
the code, and per point the emulated and simulated mean iteration time, the fitted T(M) = a + b*M of ``mgwfbp``
(MG-WFBP eq. 10) on both sides, when the emulated point ran and the host's load then) becomes one section:
simulated / emulated per (strategy, rate, model) and worker count, bold within +-10 %, and the a, b ratios (the
issue's 20 %). Every ``allreduce*.csv`` (``benchmarks/allreduce_vs_gloo.py``, copied there) becomes a table of
the ring's measured goodput share per (ranks, segment), every ``ring-goodput.csv`` (``synclab calibrate
ring-goodput``) the simulator's input made from them, every ``sampler-cost.csv`` (``benchmarks/sampler_cost.py``)
a table of the traffic sampler's CPU; an ``about.md`` says in words what a record is for.
``docs/validation/grid.csv`` names, oldest first, the records that measured issue 14's grid under its own
conditions; the document opens with that grid as it stands (every strategy x {1, 4 Gbit/s} x {2, 4, 8, 16}
workers x {ResNet-50, VGG-16}, each point from the newest listed record that has it) and ``grid.png`` plots it.

:func:`render` is pure (the page's text from the records; ``synclab docs`` and the freshness test call it);
:func:`write` (``synclab validate doc``) also draws ``grid.png`` and, where the README has the
``<!-- grid:begin -->`` ... ``<!-- grid:end -->`` markers, replaces the grid's summary between them.
"""

from __future__ import annotations

import csv
import json
import os
from pathlib import Path

from synclab.fileio import InputFileError, read_text, write_group

RECORDS = "docs/validation"
DOC = "docs/results/validation.md"
README = "README.md"
# What records made before ``synclab validate grid`` existed name as their command; its options are the same.
SCRIPT_BEFORE_COMMAND = "python experiments/sim_vs_emu.py "


class ValidationDocError(ValueError):
    """A validation record or the README block that cannot be used; the message names the file."""


def _f(v, fmt: str = ".3f") -> str:
    return "—" if v in (None, "") else format(float(v), fmt)


ITERATION_TOL, FIT_TOL = 0.10, 0.20  # the issue's ±10 % on the mean iteration, 20 % on mgwfbp's a and b


def _within(v, tol: float = ITERATION_TOL) -> bool:
    return abs(float(v) - 1) <= tol


def _mark(v, tol: float = ITERATION_TOL) -> str:
    """A ratio to three places, bold where within ``tol`` of 1."""
    return f"**{float(v):.3f}**" if _within(v, tol) else f"{float(v):.3f}"


def _ratio_cell(r: dict) -> str:
    if r.get("ratio") in (None, ""):
        return f"emulated only ({_f(r.get('emulated_s'))} s)" if r.get("emulated_s") else r.get("error", "—")
    mark = _mark(r["ratio"])
    busy = r.get("emu_host_busy")
    host = "" if busy in (None, "") else f", host {100 * float(busy):.0f} % busy"
    pace = ", each worker's own pace" if r.get("pace") == "own" else ""
    return f"{mark} ({_f(r['simulated_s'])} / {_f(r['emulated_s'])} s, D = {r.get('dilation', '?')}{host}{pace})"


def _timing(rows: list[dict]) -> list[str]:
    """When the emulated points ran, their host minutes and the load at their ends (none: no timed point)."""
    timed = [r for r in rows if r.get("emu_started")]
    if not timed:
        return []
    loads = [float(r["emu_load_end"]) for r in timed if r.get("emu_load_end") not in (None, "")]
    return ["", f"Emulated {min(r['emu_started'] for r in timed)} to {max(r['emu_started'] for r in timed)} "
                f"(point starts), {sum(float(r['emu_wall_s'] or 0) for r in timed) / 60:.1f} host min; "
                + (f"1-minute load average at the points' ends {min(loads):.1f}–{max(loads):.1f}." if loads
                   else "load not recorded.")]


def grid_section(name: str, meta: dict, rel_png: str | None) -> tuple[list[str], dict]:
    """One record's section and its counts (points compared, within ±10 %, b ratios within 20 %)."""
    rows = meta["rows"]
    workers = sorted({int(r["workers"]) for r in rows})
    keys = list(dict.fromkeys((r["strategy"], r["rate"], r["model"]) for r in rows))
    by = {(r["strategy"], r["rate"], r["model"], int(r["workers"])): r for r in rows}
    compared = [r for r in rows if r.get("ratio") not in (None, "")]
    within = sum(_within(r["ratio"]) for r in compared)
    fits = [r for r in compared if r.get("b_ratio") not in (None, "")]
    fits_ok = sum(_within(r["b_ratio"], FIT_TOL) and _within(r["a_ratio"], FIT_TOL) for r in fits)
    command, was = meta["command"], ""
    if command.startswith(SCRIPT_BEFORE_COMMAND):  # recorded before the script became a command (same options)
        command = "synclab validate grid " + command[len(SCRIPT_BEFORE_COMMAND):]
        was = f" (recorded as `{SCRIPT_BEFORE_COMMAND.strip()} …`, the script this command replaced)"
    lines = [f"## `{name}`", "", f"`{command}`{was} — code `{meta.get('code', '?')}`, recorded "
             f"{meta.get('written', '?')}.", "",
             f"{within} of {len(compared)} points within ±10 %"
             + (f"; `mgwfbp`'s fitted a and b both within 20 % at {fits_ok} of {len(fits)}" if fits else "") + ".", "",
             "Simulated ÷ emulated mean iteration (simulated / emulated s, dilation"
             + (", how busy the host's cores were over the emulated point's measured iterations"
                if any(r.get("emu_host_busy") not in (None, "") for r in rows) else "") + "):", "",
             "| strategy | rate | model | " + " | ".join(f"{w} workers" for w in workers) + " |",
             "|---|---|---|" + "---|" * len(workers)]
    for k in keys:
        lines.append(f"| `{k[0]}` | {k[1]} | {k[2]} | "
                     + " | ".join(_ratio_cell(by[(*k, w)]) if (*k, w) in by else "" for w in workers) + " |")
    if fits:
        lines += ["", "`mgwfbp`'s fit of T(M) = a + b·M (emulated clock), emulated vs simulated:", "",
                  "| point | a emulated | a simulated | a ratio | b emulated | b simulated | b ratio |",
                  "|---|---|---|---|---|---|---|"]
        for r in fits:
            lines.append(f"| `{r['strategy']}` {r['rate']} {r['model']} {r['workers']} workers | "
                         f"{_f(float(r['emu_a_s']) * 1e3)} ms | {_f(float(r['sim_a_s']) * 1e3)} ms | "
                         f"{_f(r['a_ratio'])} | "
                         f"{_f(float(r['emu_b_s_per_byte']) * 1e9, '.2f')} ns/B | "
                         f"{_f(float(r['sim_b_s_per_byte']) * 1e9, '.2f')} ns/B | {_f(r['b_ratio'])} |")
    lines += _timing(rows)
    if rel_png:
        lines += ["", f"![{name}]({rel_png})"]
    return lines + [""], {"compared": len(compared), "within": within, "fits": len(fits), "fits_ok": fits_ok}


def random_section(name: str, meta: dict, rel_png: str | None) -> tuple[list[str], dict]:
    """A random sample's section (``synclab validate --random N --seed S --record NAME``): every drawn point with
    its coordinates, the D its run picked and simulated (defaults) / emulated, and its counts."""
    rows, info = meta["rows"], meta["random"]
    b = info.get("bounds", {})
    compared = [r for r in rows if r.get("ratio") not in (None, "")]
    within = sum(_within(r["ratio"]) for r in compared)
    beyond = sum(not _within(r["ratio"], FIT_TOL) for r in compared)
    lines = [f"## `{name}`", "",
             f"`{meta['command']}` — code `{meta.get('code', '?')}`, recorded {meta.get('written', '?')}.", "",
             f"**{within} of {len(compared)} points within ±10 %, {beyond} beyond ±20 %**"
             + (f" ({len(rows) - len(compared)} of {len(rows)} drawn not compared)" if len(compared) < len(rows)
                else "")
             + f": {info['n']} points drawn with seed {info['seed']}, the emulator (`synclab run`) at the dilation "
             "its own rule picks, the simulator (`synclab simulate`) with its defaults (no host-modelling flag). "
             f"Drawn from: strategies {', '.join(f'`{x}`' for x in b.get('strategies', []))}; "
             f"{b.get('workers', ['?', '?'])[0]}–{b.get('workers', ['?', '?'])[1]} workers; "
             f"1–{b.get('shards', ['?', '?'])[1]} PS shards (never more than the workers); "
             f"{_range(b.get('rate_gbit'))} Gbit/s; one-way delay {_range(b.get('delay_ms'))} ms; models "
             f"{', '.join(b.get('models', []))}; compute scale {_range(b.get('scale'))}; "
             f"{b.get('iterations', '?')} iterations, {b.get('warmup', '?')} of them warm-up. A point estimated above "
             f"{b.get('max_point_s', '?')} host seconds was drawn again ({info.get('redrawn', '?')} times).", "",
             "| # | strategy | workers | shards | rate | delay | model (batch) | scale | D | emulated s | simulated s "
             "| sim ÷ emu | host busy |", "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        busy = r.get("emu_host_busy")
        ratio = _mark(r["ratio"]) if r.get("ratio") not in (None, "") else r.get("error", "—")
        lines.append(f"| {r['index']} | `{r['strategy']}` | {r['workers']} | {r.get('shards') or '—'} | "
                     f"{float(r['rate_mbit']) / 1e3:g} Gbit/s | {r['delay_us']} µs | {r['model']} ({r['batch']}) | "
                     f"{r['scale']} | {r.get('dilation', '?')} | {_f(r.get('emulated_s'))} | "
                     f"{_f(r.get('simulated_s'))} | {ratio} | "
                     + ("—" if busy in (None, "") else f"{100 * float(busy):.0f} %") + " |")
    lines += _timing(rows)
    if rel_png:
        lines += ["", f"![{name}]({rel_png})"]
    return lines + [""], {"compared": len(compared), "within": within, "fits": 0, "fits_ok": 0}


def explain_section(path: Path) -> list[str]:
    """A random sample's ``explain.csv`` (``synclab validate --random ... --explain``): every point beyond ±10 %
    simulated again with one emulator artifact modelled at a time."""
    from synclab.validate.random_points import EXPLANATIONS

    rows = list(csv.DictReader(path.open()))
    if not rows:
        return []
    lines = ["Points beyond ±10 %, simulated again with one of the emulator's own artifacts modelled at a time "
             f"(`{path.name}`; simulated ÷ emulated, bold within ±10 %):", ""]
    lines += [f"- *{tag}*: {what}" for tag, what, _ in EXPLANATIONS]
    lines += ["", "| # | strategy | D | defaults | " + " | ".join(t for t, _, _ in EXPLANATIONS) + " |",
              "|---|---|---|---|" + "---|" * len(EXPLANATIONS)]
    for r in rows:
        cells = [_mark(r[f"{t}_ratio"]) if r.get(f"{t}_ratio") else "—" for t, _, _ in EXPLANATIONS]
        lines.append(f"| {r['index']} | `{r['strategy']}` | {r['dilation']} | {_mark(r['ratio'])} | "
                     + " | ".join(cells) + " |")
    return lines + [""]


def _range(v) -> str:
    return "?" if not v else f"{v[0]:g}–{v[1]:g}"


GRID_RATES = ("1gbit", "4gbit")
GRID_WORKERS = (2, 4, 8, 16)
GRID_MODELS = ("resnet50", "vgg16")


def grid_strategies() -> list[str]:
    """Every registered strategy but ``local`` (no synchronization to simulate)."""
    from synclab.strategies import registry

    return [n for n in registry.names() if n != "local"]


def grid_points(d: Path, listing: Path) -> tuple[dict, list[dict]]:
    """(strategy, rate, model, workers) -> (record, row), from the records ``listing`` names oldest first: a
    newer record's point replaces an older's. ``listing`` is a CSV of ``record,note``."""
    entries = list(csv.DictReader(listing.open()))
    points: dict = {}
    for e in entries:
        path = d / e["record"] / "sim-vs-emu.json"
        if not path.exists():
            raise ValidationDocError(f"{listing} names record {e['record']!r}, but {path} does not exist")
        for r in _record(path)["rows"]:
            key = (r["strategy"], r["rate"], r["model"], int(r["workers"]))
            if r.get("ratio") not in (None, "") and key[1] in GRID_RATES and key[2] in GRID_MODELS:
                points[key] = (e["record"], r)
    return points, entries


def grid_plot(points: dict, strategies: list[str], out: Path) -> None:
    """Simulated ÷ emulated per point of the grid, one panel per (rate, model), the ±10 % band shaded."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharey=True)
    for ax, (rate, model) in zip(axes.flat, [(r, m) for m in GRID_MODELS for r in GRID_RATES]):
        ax.axhspan(0.9, 1.1, color="tab:green", alpha=0.12)
        ax.axhline(1.0, color="grey", lw=0.8)
        for i, s in enumerate(strategies):
            xs = [w for w in GRID_WORKERS if (s, rate, model, w) in points]
            ys = [float(points[(s, rate, model, w)][1]["ratio"]) for w in xs]
            if xs:
                ax.plot([GRID_WORKERS.index(w) + (i - len(strategies) / 2) * 0.04 for w in xs], ys, "o-",
                        label=s, ms=4, color=f"C{i % 10}")
        ax.set_xticks(range(len(GRID_WORKERS)), [str(w) for w in GRID_WORKERS])
        ax.set_title(f"{model}, {rate}")
        ax.set_xlabel("workers")
    axes[0][0].set_ylabel("simulated ÷ emulated iteration")
    axes[1][0].set_ylabel("simulated ÷ emulated iteration")
    by_label: dict = {}  # one entry per strategy drawn in any panel (its colour is the same in all)
    for ax in axes.flat:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            by_label.setdefault(lab, h)
    fig.legend(by_label.values(), by_label.keys(), loc="lower center", ncol=max(1, len(by_label)), fontsize=8)
    fig.suptitle("issue 14's grid as it stands (green: within ±10 %)")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    fig.savefig(out, dpi=110)
    plt.close(fig)


def grid_as_it_stands(d: Path, listing: Path, png_rel: str | None) -> tuple[list[str], dict]:
    """The issue's whole grid, each point from the newest listed record that has it."""
    points, entries = grid_points(d, listing)
    strategies = grid_strategies()
    total = len(strategies) * len(GRID_RATES) * len(GRID_WORKERS) * len(GRID_MODELS)
    within = sum(_within(r["ratio"]) for _, r in points.values())
    lines = ["## The grid as it stands", "",
             f"Issue 14's grid — every strategy × {{1, 4 Gbit/s}} × {{2, 4, 8, 16}} workers × {{ResNet-50, VGG-16}}, "
             f"{total} points — each point from the newest record that has it among those "
             f"`docs/validation/grid.csv` lists. **{len(points)} of {total} points measured, {within} of them "
             "within ±10 %**; an empty cell is a point not yet emulated. Cells: simulated ÷ emulated (bold within "
             "±10 %), the record. A record made with code 6e7ef17 or later compares `asgd` and `ssdsgd`, whose workers do not "
             "wait for one another every iteration, at the mean worker's iteration (`pace: own` in "
             "`summary.json`); older records took the slowest worker's for every strategy.", "",
             "| strategy | rate | model | " + " | ".join(f"{w} workers" for w in GRID_WORKERS) + " |",
             "|---|---|---|" + "---|" * len(GRID_WORKERS)]
    for model in GRID_MODELS:
        for rate in GRID_RATES:
            for s in strategies:
                cells = []
                for w in GRID_WORKERS:
                    if (s, rate, model, w) not in points:
                        cells.append("")
                        continue
                    rec, r = points[(s, rate, model, w)]
                    cells.append(f"{_mark(r['ratio'])} [`{rec}`](#{rec})")
                if any(cells):
                    lines.append(f"| `{s}` | {rate} | {model} | " + " | ".join(cells) + " |")
    fits = [(k, rec, r) for k, (rec, r) in sorted(points.items()) if r.get("b_ratio") not in (None, "")]
    if fits:
        lines += ["", "`mgwfbp`'s fit of T(M) = a + b·M, simulated ÷ emulated (the issue's 20 %), at the same points:",
                  "", "| point | a ratio | b ratio | record |", "|---|---|---|---|"]
        for k, rec, r in fits:
            lines.append(f"| `{k[0]}` {k[1]} {k[2]} {k[3]} workers | {_mark(r['a_ratio'], FIT_TOL)} | "
                         f"{_mark(r['b_ratio'], FIT_TOL)} | [`{rec}`](#{rec}) |")
    missing = [f"{rate} {model}" for model in GRID_MODELS for rate in GRID_RATES
               if not any((s, rate, model, w) in points for s in strategies for w in GRID_WORKERS)]
    if missing:
        lines += ["", "No point measured yet at: " + ", ".join(missing) + "."]
    lines += ["", "The records, oldest first, and what each stands for:", ""]
    lines += [f"- [`{e['record']}`](#{e['record']}): {e['note']}" for e in entries]
    if png_rel:
        lines += ["", f"![the grid as it stands]({png_rel})"]
    return lines + [""], {"points": points, "strategies": strategies}


README_BEGIN, README_END = "<!-- grid:begin -->", "<!-- grid:end -->"


def readme_block(points: dict, strategies: list[str], png_rel: str) -> list[str]:
    """The README's short form of the grid: per (rate, model), points measured and within ±10 % by workers."""
    lines = [README_BEGIN, "",
             "Generated by `synclab validate doc` from `docs/validation/grid.csv` (the whole table, "
             "point by point with its record: "
             "[docs/results/validation.md](docs/results/validation.md#the-grid-as-it-stands)). "
             f"Points within ±10 % of those measured, of {len(strategies)} strategies:", "",
             "| rate | model | " + " | ".join(f"{w} workers" for w in GRID_WORKERS) + " |",
             "|---|---|" + "---|" * len(GRID_WORKERS)]
    for model in GRID_MODELS:
        for rate in GRID_RATES:
            cells = []
            for w in GRID_WORKERS:
                got = [float(points[k][1]["ratio"]) for k in ((s, rate, model, w) for s in strategies) if k in points]
                ok = sum(_within(v) for v in got)
                cells.append(f"{ok} of {len(got)} ({min(got):.2f}–{max(got):.2f})" if got else "not yet")
            lines.append(f"| {rate} | {model} | " + " | ".join(cells) + " |")
    return lines + ["", f"![the validation grid as it stands]({png_rel})", "", README_END]


def replace_block(text: str, block: list[str]) -> str:
    """``text`` with what stands between the grid markers (markers included) replaced by ``block``."""
    start, end = text.find(README_BEGIN), text.find(README_END)
    if start < 0 or end < start:
        raise ValidationDocError(f"the README has no {README_BEGIN} … {README_END} block to replace")
    return text[:start] + "\n".join(block) + text[end + len(README_END):]


def ring_section(name: str, paths: list[Path]) -> list[str]:
    from synclab.sim.run import PAYLOAD_SHARE

    rows = [r for path in paths for r in csv.DictReader(path.open())]
    rows.sort(key=lambda r: (int(r["ranks"]), float(r["mbytes"])))
    lines = [f"## `{name}`: the ring alone ({', '.join(f'`{p.name}`' for p in paths)})", "",
             "SyncLab's ring all-reduce alone (`benchmarks/allreduce_vs_gloo.py`), its share of the link's TCP "
             "goodput (ring bound ÷ time ÷ 1448/1514) by ranks and segment (bytes ÷ ranks), gloo's beside it; CPU: "
             "all ranks' CPU seconds per GB of ring traffic, SyncLab / gloo:", "",
             "| link | ranks | MB | segment | SyncLab s | gloo s | ring bound s | SyncLab share | gloo share "
             "| CPU s/GB |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        n, mb, bound = int(r["ranks"]), float(r["mbytes"]), float(r["ring_bound_s"])
        def share(t):
            return "—" if t in (None, "") else f"{min(1.0, bound / float(t) / PAYLOAD_SHARE):.3f}"
        lines.append(f"| {Path(r['link']).name} | {n} | {mb:.1f} | {mb * 1e6 / n / 1e3:.0f} kB | "
                     f"{_f(r['synclab_s'])} | "
                     f"{_f(r.get('gloo_s'))} | {bound:.3f} | {share(r['synclab_s'])} | {share(r.get('gloo_s'))} | "
                     f"{_f(r.get('synclab_cpu_s_per_gb'), '.1f')} / {_f(r.get('gloo_cpu_s_per_gb'), '.1f')} |")
    return lines + [""]


def calibrated_section(name: str, path: Path) -> list[str]:
    """``synclab calibrate ring-goodput``'s table: the share that makes the simulated ring alone take its measured
    time."""
    rows = list(csv.DictReader(path.open()))
    lines = [f"## `{name}`: the simulator's ring-goodput input (`{path.name}`)", "",
             "Each measured ring simulated with the host model (`synclab.sim.run.simulate_ring`, 2 cores) at the "
             "full link share, then with the share that makes it take the measured time "
             "(`synclab calibrate ring-goodput`; 1 where the model is already slower):", "",
             "| ranks | segment | emulated s | simulated s, share 1 | share | simulated s, share |",
             "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['ranks']} | {int(r['segment_bytes']) / 1e3:.0f} kB | {_f(r['emulated_s'])} | "
                     f"{_f(r['simulated_full_share_s'])} | {_f(r['share'])} | {_f(r['simulated_s'])} |")
    return lines + [""]


def sampler_section(name: str, path: Path) -> list[str]:
    """``benchmarks/sampler_cost.py``'s table: one node's traffic sampler alone, its CPU by interval."""
    rows = list(csv.DictReader(path.open()))
    lines = [f"## `{name}`: a node's traffic sampler alone (`{path.name}`)", "",
             "One `TrafficSampler` in a process of its own (`benchmarks/sampler_cost.py`), CPU beyond an idle "
             "process's, median of the repeats:", "",
             "| interval | samples/s | CPU ms per host second | CPU µs per sample |", "|---|---|---|---|"]
    for r in rows:
        per = r.get("cpu_s_per_sample")
        per_us = "—" if per in (None, "") else f"{float(per) * 1e6:.0f}"
        lines.append(f"| {float(r['interval_ms']):g} ms | {float(r['samples_per_s']):.1f} | "
                     f"{float(r['cores_per_node']) * 1e3:.2f} | {per_us} |")
    return lines + [""]


def _sections(root: Path) -> tuple[list[str], dict | None]:
    """The document's lines and the grid (its points and strategies; None without ``grid.csv``)."""
    d, out = root / RECORDS, root / DOC
    if not d.is_dir():
        raise ValidationDocError(f"no validation records in {d} (synclab validate grid --record NAME)")
    sections, summary, grid = [], [], None
    if (d / "grid.csv").exists():
        png = d / "grid.png"
        lines, grid = grid_as_it_stands(d, d / "grid.csv", Path(os.path.relpath(png, out.parent)).as_posix())
        sections += lines
    records = sorted(p for p in d.iterdir() if p.is_dir())
    metas = {rec: _record(rec / "sim-vs-emu.json") for rec in records if (rec / "sim-vs-emu.json").exists()}
    # random samples stand beside the grid, before the records of single studies
    records.sort(key=lambda rec: "random" not in metas.get(rec, {}))
    for rec in records:
        found: list[str] = []
        if rec in metas:
            meta = metas[rec]
            png = rec / "sim-vs-emu.png"
            rel = Path(os.path.relpath(png, out.parent)).as_posix() if png.exists() else None
            lines, counts = (random_section if "random" in meta else grid_section)(rec.name, meta, rel)
            if "random" in meta and (rec / "explain.csv").exists():
                lines += explain_section(rec / "explain.csv")
            found += lines
            summary.append((rec.name, counts))
        if rings := sorted(rec.glob("allreduce*.csv")):
            found += ring_section(rec.name, rings)
        if (rec / "sampler-cost.csv").exists():
            found += sampler_section(rec.name, rec / "sampler-cost.csv")
        if (rec / "ring-goodput.csv").exists():
            found += calibrated_section(rec.name, rec / "ring-goodput.csv")
        if found and (rec / "about.md").exists():  # what the record is for, in words, under its first heading
            found[2:2] = [_text(rec / "about.md", "record note").strip(), ""]
        sections += found
    head = ["# The simulator against the emulator", "",
            "Generated by `synclab validate doc` from the records under `docs/validation/` "
            "(`synclab validate grid --record NAME`); do not edit by hand. "
            "[Fidelity](../explanation/fidelity.md) explains the model.", ""]
    if summary:
        head += ["| record | points within ±10 % | `mgwfbp` a, b within 20 % |", "|---|---|---|"]
        for name, c in summary:
            head.append(f"| [`{name}`](#{name}) | {c['within']} of {c['compared']} | "
                        + (f"{c['fits_ok']} of {c['fits']}" if c["fits"] else "—") + " |")
        head.append("")
    return head + sections, grid


def render(root: Path) -> str:
    """The text of ``docs/results/validation.md`` from the records under ``root/docs/validation`` (pure)."""
    lines, _ = _sections(root)
    return "\n".join(lines)


def write(root: Path) -> list[Path]:
    """Write the document and ``grid.png``, and the README's grid block where it has the markers.

    Everything is read and built first; the document and the README are then written together, each whole
    (:func:`synclab.fileio.write_group`), so a bad record leaves both as they were, never out of step."""
    lines, grid = _sections(root)
    out = root / DOC
    texts: dict[Path, str] = {out: "\n".join(lines)}
    png = root / RECORDS / "grid.png"
    if grid is not None:
        readme = root / README
        text = _text(readme, "README") if readme.exists() else ""
        if README_BEGIN in text and README_END in text:
            block = readme_block(grid["points"], grid["strategies"], Path(os.path.relpath(png, root)).as_posix())
            texts[readme] = replace_block(text, block)
        grid_plot(grid["points"], grid["strategies"], png)
    out.parent.mkdir(parents=True, exist_ok=True)
    written = write_group(texts)
    return [written[0], *([png] if grid is not None else []), *written[1:]]


def _text(path: Path, what: str) -> str:
    try:
        return read_text(path, what)
    except InputFileError as e:
        raise ValidationDocError(str(e)) from None


def _record(path: Path) -> dict:
    """A validation record's JSON; :class:`ValidationDocError` names the file when it cannot be used."""
    try:
        data = json.loads(_text(path, "validation record"))
    except ValueError as e:
        if isinstance(e, ValidationDocError):
            raise
        raise ValidationDocError(f"validation record {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not isinstance(data.get("rows"), list):
        raise ValidationDocError(f"validation record {path} is not a record (a JSON object with 'rows')")
    return data
