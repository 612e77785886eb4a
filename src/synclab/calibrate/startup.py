"""The emulator's all-reduce cost T(M) = a + b*M against time dilation D (``synclab calibrate startup``;
issue 14: what a start-up is made of, the ``synclab simulate --startup`` input).

For every (workers, D) point this runs ``synclab run`` with strategy ``mgwfbp`` (ResNet-50 replayed, 1 Gbit/s
egress links) just long enough for its setup fit (MG-WFBP eq. 10, ``fit_cost_model``: 6 sizes x 5 timed rounds
of ring all-reduces, rank 0's host clock) and one profiled iteration, each run under ``flock LOCK`` when given,
with ``uptime`` just before and after it inside the lock. From ``plan.json``'s ``cost_fit`` it keeps, per run,
on the emulated clock (host seconds / D): the fit's a and b, a per message (a / 2(N-1), the ring's messages),
the per-size medians, and the median of the smallest sizes (the start-up with no bandwidth term: their bytes fit
the tbf bucket). With ``simulate`` it also simulates every run's own spec (``synclab simulate --host-cpu 2``)
and puts the simulator's fit beside the emulator's (``sim_*`` columns).
"""

from __future__ import annotations

import csv
import json
import statistics
import subprocess
import sys
from pathlib import Path

from synclab.fileio import write_atomic

SMALL_BYTES = 50_000  # fit sizes up to this many bytes: start-up only (0.4 ms of 1 Gbit/s, inside the tbf bucket)


def parse_points(text: str) -> list[tuple[int, float]]:
    """``"2:1,4:8"`` -> [(2, 1.0), (4, 8.0)]: workers:dilation pairs."""
    out = []
    for item in text.split(","):
        w, sep, d = item.strip().partition(":")
        try:
            workers, dilation = int(w), float(d)
        except ValueError:
            raise ValueError(f"--points item {item!r} must be WORKERS:DILATION, e.g. 2:4") from None
        if not sep or workers < 2 or dilation < 1:
            raise ValueError(f"--points item {item!r}: needs workers >= 2 and dilation >= 1")
        out.append((workers, dilation))
    return out


def summarize(plan: dict, workers: int, dilation: float) -> dict:
    """The fit of one run's ``plan.json`` on the emulated clock (host seconds ÷ ``dilation``)."""
    fit = plan["cost_fit"]
    messages = 2 * (workers - 1)
    small = [t for m, t in zip(fit["sizes"], fit["median_seconds"]) if m <= SMALL_BYTES]
    return {"a_s": fit["a"] / dilation, "b_s_per_byte": fit["b"] / dilation,
            "a_per_message_s": fit["a"] / dilation / messages, "r2": fit["r2"],
            "small_host_s": statistics.median(small) if small else None,
            "small_per_message_s": statistics.median(small) / dilation / messages if small else None,
            "sizes": fit["sizes"], "median_s": [t / dilation for t in fit["median_seconds"]]}


def run_point(spec: Path, out: Path, workers: int, dilation: float, rate: str, lock: str | None) -> dict:
    """One emulated run of ``mgwfbp`` just long enough for its setup fit; its ``plan.json``."""
    sets = ["strategy.name=mgwfbp", f"cluster.workers={workers}", f"network.rate={rate}", "model.name=resnet50",
            "compute.mode=replay", "compute.scale=0.01", "run.iterations=2", "run.warmup=1",
            "strategy.profile_iterations=1", f"run.dilation={dilation:g}"]
    cmd = [sys.executable, "-m", "synclab", "run", str(spec), "--out", str(out / "emu"), "--no-report"]
    for s in sets:
        cmd += ["--set", s]
    # uptime just before and after the run, inside the one lock (the load the run met)
    inner = (f"date +%s.%N > {out}/t-before.txt; uptime > {out}/uptime-before.txt; {' '.join(cmd)}; rc=$?; "
             f"uptime > {out}/uptime-after.txt; date +%s.%N > {out}/t-after.txt; exit $rc")
    full = ["flock", lock, "sh", "-c", inner] if lock else ["sh", "-c", inner]
    out.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(full, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"run failed: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return json.loads((out / "emu" / "plan.json").read_text())


def simulate_point(out: Path, sim_args: list[str], tag: str) -> dict:
    """The simulator's fit of the run's own spec (``plan.json`` of ``synclab simulate``), emulated clock."""
    sim_out = out / f"sim{tag}"
    cmd = [sys.executable, "-m", "synclab", "simulate", str(out / "emu" / "spec.yaml"), "--out", str(sim_out),
           "--host-cpu", "2", *sim_args]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode:
        raise RuntimeError(f"simulate failed: {(r.stdout + r.stderr).strip().splitlines()[-1:]}")
    return json.loads((sim_out / "plan.json").read_text())


def held_s(out: Path) -> float | None:
    """Seconds the run held the lock (from the stamps written inside it)."""
    try:
        return float((out / "t-after.txt").read_text()) - float((out / "t-before.txt").read_text())
    except (OSError, ValueError):
        return None


def load(out: Path) -> str:
    """The 1-minute load average before / after the run (from its ``uptime`` stamps)."""
    try:
        return " / ".join(p.read_text().split("load average:")[1].strip()
                          for p in (out / "uptime-before.txt", out / "uptime-after.txt"))
    except (OSError, IndexError):
        return ""


COLUMNS = ["workers", "dilation", "repeat", "a_s", "a_per_message_s", "b_s_per_byte", "r2", "small_host_s",
           "small_per_message_s", "load", "held_s", "sim_a_s", "sim_a_per_message_s", "sim_b_s_per_byte",
           "sim_small_per_message_s", "error"]


def sweep(spec: Path, points: list[tuple[int, float]], out: Path, *, repeats: int = 1, rate: str = "1gbit",
          lock: str | None = None, simulate: bool = False, sim_args: list[str] = (), sim_tag: str = "",
          log=print) -> list[dict]:
    """Every (workers, D) point ``repeats`` times (finished runs in ``out`` are reused); one row each, an
    ``error`` column for a run that failed."""
    rows = []
    for rep in range(repeats):
        for workers, dilation in points:
            run = out / f"{workers}w-d{dilation:g}-r{rep}"
            path = run / "emu" / "plan.json"
            try:
                plan = json.loads(path.read_text()) if path.exists() else run_point(
                    spec, run, workers, dilation, rate, lock)
                if "cost_fit" not in plan:
                    raise RuntimeError("plan.json has no cost_fit (the run did not reach its plan)")
            except RuntimeError as e:
                rows.append({"workers": workers, "dilation": dilation, "repeat": rep, "error": str(e)})
                log(f"{workers} workers, D = {dilation:g}, repeat {rep}: {e}")
                continue
            row = {"workers": workers, "dilation": dilation, "repeat": rep, **summarize(plan, workers, dilation),
                   "load": load(run), "held_s": held_s(run)}
            if simulate:
                sim = summarize(simulate_point(run, list(sim_args), sim_tag), workers, 1.0)
                row.update({f"sim_{k}": v for k, v in sim.items()})
            rows.append(row)
            log(f"{workers} workers, D = {dilation:g}, repeat {rep}: a {row['a_s'] * 1e3:.3f} ms "
                f"({row['a_per_message_s'] * 1e3:.3f} ms/message), b {row['b_s_per_byte'] * 1e9:.2f} ns/B, "
                f"small sizes {row['small_per_message_s'] * 1e3:.3f} ms/message; load {row['load']}"
                + (f"; simulated a {row['sim_a_s'] * 1e3:.3f} ms, b {row['sim_b_s_per_byte'] * 1e9:.2f} ns/B, "
                   f"small {row['sim_small_per_message_s'] * 1e3:.3f} ms/message" if simulate else ""))
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "startup-dilation.json", json.dumps(rows, indent=1))
    with (out / "startup-dilation.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore")
        w.writeheader()
        w.writerows(rows)
    return rows
