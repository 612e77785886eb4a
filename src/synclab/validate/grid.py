"""The simulator against the emulator, point by point (``synclab validate grid``; issue 14 item 3).

For every point of a grid (strategy x link rate x workers x model, replayed compute) this runs ``synclab run``
(the emulator: real processes, gRPC, kernel-shaped links) and ``synclab simulate`` (SimPy) on the very same
spec and overrides, and reports simulated / emulated mean iteration time; a point is within the target when
that ratio is within +-10 %. Rates of 4 Gbit/s and above run the emulator with a dilation (the simulator needs
none: its clock is simulated). The fitted all-reduce cost T(M) = a + b*M of ``mgwfbp`` (MG-WFBP eq. 10) is
compared on both sides (the issue's 20 %).

A point takes 30 s to several minutes of host time on the emulator, so a grid runs in parts: the summary of
a point already in the output directory is reused. :func:`record` copies the results into
``docs/validation/NAME/`` with the command, the code version and, per emulated point, when it ran, its wall
time and the host's load when it ended: the checked-in record :mod:`synclab.validate.doc` turns into
``docs/results/validation.md``.
"""

from __future__ import annotations

import csv
import itertools
import json
import subprocess
import sys
from pathlib import Path

from synclab.fileio import write_atomic


def short_run(strategy: str) -> list[str]:
    """The overrides that fit ``strategy`` into a grid point's few iterations (``Strategy.short_run``)."""
    from synclab.strategies import registry

    return list(registry.get(strategy).short_run)


def _summary(out: Path, cmd: list[str], *, redo: bool = False) -> dict:
    path = out / "summary.json"
    if redo or not path.exists():
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd[2:5])} failed: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return json.loads(path.read_text())


def iteration_mean(run: Path, summary: dict) -> tuple[float, str]:
    """A run's mean cluster iteration time and its pace, computed again from its ``iterations.csv`` by
    :func:`synclab.report.compute_summary` with the strategy's ``lockstep``: runs recorded before code 6e7ef17
    summarized every strategy at the slowest worker's pace, the asynchronous ones (``asgd``, ``ssdsgd``) too.
    Calibration iterations are left out where the summary names them (records from before that field have
    none, and keep their figures)."""
    from synclab.report import compute_summary
    from synclab.report.records import summary_calibration
    from synclab.strategies import registry

    with (run / "iterations.csv").open(newline="") as f:
        rows = list(csv.DictReader(f))
    fig = compute_summary(rows, warmup=summary["warmup"], calibration=summary_calibration(summary),
                          lockstep=registry.get(summary["strategy"]).lockstep)
    return fig["iteration_seconds"]["mean"], fig["pace"]


def point(spec: Path, out: Path, sets: list[str], dilation: int | None, *, lock: str | None = None,
          sim_args: list[str] = (), resim: bool = False, emu_only: bool = False, sim_only: bool = False) -> dict:
    """Emulate and simulate one point (each reused where its summary is in ``out``). ``dilation`` None: the
    emulator picks its own D (``synclab run``'s rule), the simulator gets none, and the row's ``dilation`` is
    the one the run recorded in its ``spec.yaml``."""
    emu_cmd = [sys.executable, "-m", "synclab", "run", str(spec), "--out", str(out / "emu"), "--no-report"]
    if lock:  # one emulation on the host at a time, taken per point (not for the whole grid)
        emu_cmd = ["flock", lock, *emu_cmd]
    sim_cmd = [sys.executable, "-m", "synclab", "simulate", str(spec), "--out", str(out / "sim"), *sim_args]
    # the simulator's clock needs no dilation; its host-CPU model (--sim-arg=--host-cpu) reads run.dilation
    for s in [*sets, *([f"run.dilation={dilation}"] if dilation is not None else [])]:
        sim_cmd += ["--set", s]
        emu_cmd += ["--set", s]
    if sim_only and not (out / "emu" / "summary.json").exists():
        raise RuntimeError("no emulated run recorded (--sim-only)")
    emu = _summary(out / "emu", emu_cmd)
    if dilation is None:
        dilation = run_dilation(out / "emu")
    provenance = _provenance(out / "emu", emu)
    e, pace = iteration_mean(out / "emu", emu)
    if emu_only:
        return {"emulated_s": e, "pace": pace, "backend": emu.get("network_backend"), "dilation": dilation,
                **provenance}
    s_, _ = iteration_mean(out / "sim", _summary(out / "sim", sim_cmd, redo=resim))
    row = {"emulated_s": e, "simulated_s": s_, "ratio": s_ / e, "within_10pct": abs(s_ / e - 1) <= 0.10,
           "pace": pace, "backend": emu.get("network_backend"), "dilation": dilation, **provenance}
    return {**row, **cost_fits(out, dilation)}


def run_dilation(run: Path) -> float:
    """The run.dilation an emulated run ran at, from the resolved spec it wrote (``spec.yaml``)."""
    import yaml

    d = (yaml.safe_load((run / "spec.yaml").read_text()).get("run") or {}).get("dilation", 1.0)
    return int(d) if float(d).is_integer() else float(d)


LOAD_FILE = "load-at-end.txt"


def _provenance(emu_dir: Path, summary: dict) -> dict:
    """When the emulated point ran (``started_at``, wall seconds), the host's 1-minute load average when it
    ended (written beside its records the first time, read back when the point is reused), and how busy the host's
    cores were over its measured iterations (``host_cpu`` of its summary, :mod:`synclab.metrics.hostcpu`; runs
    before the records of 2026-11-27 have none)."""
    load = emu_dir / LOAD_FILE
    if not load.exists():
        load.write_text(Path("/proc/loadavg").read_text().split()[0] + "\n")
    started = summary.get("started_at")
    if isinstance(started, (int, float)):  # seconds since the epoch: as UTC time
        import time

        started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(started))
    host = summary.get("host_cpu") or {}
    return {"emu_started": started, "emu_wall_s": summary.get("wall_seconds"),
            "emu_load_end": float(load.read_text().split()[0]), "emu_host_busy": host.get("busy_fraction"),
            "emu_ctxt_per_s": host.get("context_switches_per_s")}


def cost_fits(out: Path, dilation: int = 1) -> dict:
    """The T(M) = a + b·M fits (MG-WFBP eq. 10; bytes, seconds) the emulator's and the simulator's ``mgwfbp``
    recorded in their plan.json, and simulated ÷ emulated of each (issue 14: within 20 %). The emulator
    times its fit on the host clock, so under dilation D its a and b are divided by D here."""
    fits = {}
    for side in ("emu", "sim"):
        path = out / side / "plan.json"
        fit = json.loads(path.read_text()).get("cost_fit") if path.exists() else None
        if isinstance(fit, dict) and "a" in fit:
            fits[side] = fit
    if len(fits) < 2:
        return {}
    e, s = {k: fits["emu"][k] / dilation for k in ("a", "b")}, fits["sim"]
    row = {"emu_a_s": e["a"], "emu_b_s_per_byte": e["b"], "sim_a_s": s["a"], "sim_b_s_per_byte": s["b"],
           "a_ratio": s["a"] / e["a"] if e["a"] else None, "b_ratio": s["b"] / e["b"] if e["b"] else None}
    # the start-up itself: the median time of the fit's sizes up to SMALL_BYTES (bytes a tbf bucket passes
    # free; the fit's a is a least-squares intercept that the larger sizes move, issue 14)
    small = {side: small_sizes_s(fits[side]) for side in fits}
    if small["emu"] is not None and small["sim"] is not None:
        row.update(emu_small_s=small["emu"] / dilation, sim_small_s=small["sim"],
                   small_ratio=small["sim"] * dilation / small["emu"] if small["emu"] else None)
    return row


SMALL_BYTES = 50_000


def small_sizes_s(fit: dict) -> float | None:
    """Median of a cost fit's per-size medians over its sizes up to :data:`SMALL_BYTES` (None: no such size)."""
    import statistics

    ts = [t for m, t in zip(fit.get("sizes", []), fit.get("median_seconds", [])) if m <= SMALL_BYTES]
    return statistics.median(ts) if ts else None


def point_dilation(dilation: str, spec: Path, sets: list[str], rate: str, *, times: int = 1) -> int:
    """A point's run.dilation: the host-capacity rule's (``dilation == "rule"``), else ``dilation`` at rates of
    4 Gbit/s and above and 1 below; ``times`` that."""
    from synclab.units import parse_rate_bps

    if dilation == "rule":
        d = rule_dilation(spec, sets)
    else:
        d = int(dilation) if parse_rate_bps(rate) >= 4e9 else 1
    return d * times


def rule_dilation(spec: Path, sets: list[str]) -> int:
    """D of :func:`synclab.config.dilation.dilation_for` for the spec with ``sets``: every node that owns
    a link (workers, and shards not co-located) sending at the link rate at once (the reproduction targets'
    rule, ``dilation: rule``)."""
    from synclab.config import load_spec, parse_override
    from synclab.config.dilation import dilation_for, links_of

    nodes, rate = links_of(load_spec(spec, [parse_override(o) for o in sets]))
    if rate is None:
        raise ValueError("dilation 'rule' needs a link rate (network.rate)")
    return dilation_for(nodes * rate)


COLUMNS = ["strategy", "rate", "workers", "model", "emulated_s", "simulated_s", "ratio", "within_10pct", "pace",
           "backend", "dilation", "emu_a_s", "emu_b_s_per_byte", "sim_a_s", "sim_b_s_per_byte", "a_ratio", "b_ratio",
           "emu_small_s", "sim_small_s", "small_ratio", "emu_started", "emu_wall_s", "emu_load_end", "emu_host_busy",
           "emu_ctxt_per_s", "error"]


def grid_points(strategies: list[str], rates: list[str], workers: list[int], models: list[str], *, scale: float,
                iterations: int, sets: list[str] = ()) -> list[tuple[dict, list[str]]]:
    """Every point of the grid: (its coordinates, the spec overrides that make it)."""
    out = []
    for strategy, rate, n, model in itertools.product(strategies, rates, workers, models):
        overrides = [f"strategy.name={strategy}", f"network.rate={rate}", f"cluster.workers={n}",
                     f"model.name={model}", "compute.mode=replay", f"compute.scale={scale}",
                     f"run.iterations={iterations}", "run.warmup=2", *short_run(strategy), *sets]
        out.append(({"strategy": strategy, "rate": rate, "workers": n, "model": model}, overrides))
    return out


def run_grid(spec: Path, points: list[tuple[dict, list[str]]], out: Path, *, dilation: str = "8",
             dilation_times: int = 1, lock: str | None = None, sim_args: list[str] = (), resim: bool = False,
             emu_only: bool = False, sim_only: bool = False, progress=None) -> list[dict]:
    """Run (or reuse) every point under ``out/<strategy>-<rate>-<N>w-<model>/``; one row per point (an
    ``error`` column for a point that failed; a ``sim_only`` point never emulated is left out)."""
    rows = []
    for coords, sets in (progress(points) if progress else points):
        d = point_dilation(dilation, spec, sets, coords["rate"], times=dilation_times)
        row = dict(coords)
        name = f"{coords['strategy']}-{coords['rate']}-{coords['workers']}w-{coords['model']}"
        try:
            row.update(point(spec, out / name, sets, d, lock=lock, sim_args=sim_args, resim=resim,
                             emu_only=emu_only, sim_only=sim_only))
        except RuntimeError as e:
            if sim_only and "--sim-only" in str(e):
                continue
            row["error"] = str(e)
        rows.append(row)
    return rows


def write_results(out: Path, rows: list[dict], columns: list[str] = COLUMNS, *,
                  log: bool = False) -> list[Path]:
    """``sim-vs-emu.json``, ``.csv`` (``columns``) and, with a compared point, ``.png`` in ``out``: simulated
    against emulated mean iteration per point, a colour per strategy, the +-10 % band shaded; ``log``: both axes
    logarithmic (points whose iterations span decades) with the +-20 % lines dashed."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "sim-vs-emu.json", json.dumps(rows, indent=2))
    with (out / "sim-vs-emu.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=columns, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    written = [out / "sim-vs-emu.json", out / "sim-vs-emu.csv"]
    ok = [r for r in rows if "ratio" in r]
    if ok:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5.5, 5))
        for i, strategy in enumerate(sorted({r["strategy"] for r in ok})):
            pts = [r for r in ok if r["strategy"] == strategy]
            ax.scatter([r["emulated_s"] for r in pts], [r["simulated_s"] for r in pts], label=strategy, zorder=3,
                       color=f"C{i % 10}", marker="os^D"[i // 10 % 4])
        hi = max(max(r["emulated_s"], r["simulated_s"]) for r in ok) * 1.1
        lo = min(min(r["emulated_s"], r["simulated_s"]) for r in ok) / 1.3 if log else 0
        xs = [lo, hi]
        ax.plot(xs, xs, "k-", lw=0.8)
        ax.fill_between(xs, [0.9 * x for x in xs], [1.1 * x for x in xs], color="0.85", label="±10 %", zorder=0)
        if log:
            for f in (0.8, 1.2):
                ax.plot(xs, [f * x for x in xs], "k--", lw=0.6, label="±20 %" if f > 1 else None)
            ax.set_xscale("log")
            ax.set_yscale("log")
        ax.set(xlabel="emulated mean iteration (s)", ylabel="simulated mean iteration (s)", xlim=(lo, hi), ylim=(lo, hi))
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(out / "sim-vs-emu.png", dpi=120)
        plt.close(fig)
        written.append(out / "sim-vs-emu.png")
    return written


def record(out: Path, name: str, command: str, root: Path, extra: dict | None = None) -> Path:
    """Copy ``out``'s results into ``root/docs/validation/NAME/``, with the command and the code that produced
    them (``-dirty`` when ``src/`` differs from the commit; records being written under docs/ do not count);
    ``extra`` adds keys to the record (a random sample's seed and bounds)."""
    import shutil
    import time

    from synclab.reproduce.runner import code_version

    dest = root / "docs" / "validation" / name
    dest.mkdir(parents=True, exist_ok=True)
    for f in ("sim-vs-emu.csv", "sim-vs-emu.png", "explain.csv"):
        if (out / f).exists():
            shutil.copyfile(out / f, dest / f)
    rows = json.loads((out / "sim-vs-emu.json").read_text())
    code = code_version(root).removesuffix("-dirty")
    changed = subprocess.run(["git", "-C", str(root), "status", "--porcelain", "--", "src"],
                             capture_output=True, text=True).stdout.strip()
    if changed:
        code += "-dirty"
    meta = {"command": command, "code": code, "written": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()),
            **(extra or {}), "rows": rows}
    (dest / "sim-vs-emu.json").write_text(json.dumps(meta, indent=1) + "\n")
    return dest
