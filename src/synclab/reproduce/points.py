"""Sweep points of a target and the two ways to run one: the emulator (``synclab run`` in a child
process, the real cluster) or the simulator (:mod:`synclab.sim`, in process). A point's metrics are
read back from its run records (summary.json, plan.json; for an emulated run with a shaped link also worker
machine 0's utilization from traffic-*.csv and spans.csv, :mod:`synclab.reproduce.utilization`) only, never
computed elsewhere.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from synclab.config.dilation import dilation_for, links_of
from synclab.fileio import write_atomic
from synclab.reproduce.calibration import CALIBRATION, Scale
from synclab.reproduce.schema import Scalar, Target, is_label
from synclab.resources import locate


@dataclass
class Point:
    """One run of a sweep: its axis values and every override handed to the spec."""

    index: int
    values: dict[str, Scalar]
    overrides: list[str]
    dilation: int = 1
    concurrent_bps: float | None = None
    engine: str = "emulate"
    notes: list[str] = field(default_factory=list)
    calibration: Scale | None = None  # the point's own row (target.calibration_gpu), else the target's

    @property
    def id(self) -> str:
        text = "_".join(f"{k.rsplit('.', 1)[-1]}={v}" for k, v in self.values.items())
        return re.sub(r"[^A-Za-z0-9=._-]", "-", text)


def _nodes(target: Target, root: Path, overrides: list[str]) -> tuple[int, float | None]:
    """(nodes that own a link, link rate in bit/s) of the spec with ``overrides``."""
    from synclab.config import load_spec, parse_override

    return links_of(load_spec(locate(target.spec, root), [parse_override(o) for o in overrides]))


def point_scale(target: Target, root: Path, overrides: list[str]) -> Scale:
    """``target.calibration_gpu`` for a cluster (emulate/simulate): the calibration row (model.name, that GPU,
    model.batch_size) of the spec with ``overrides``, turned into that point's compute.scale."""
    from synclab.config import load_spec, parse_override
    from synclab.reproduce.calibration import compute_scale, load_calibration

    spec = load_spec(locate(target.spec, root), [parse_override(o) for o in overrides])
    table = load_calibration(locate(CALIBRATION, root))
    return compute_scale(table.find(spec.model.name, target.calibration_gpu, spec.model.batch_size))


def expand(target: Target, root: Path, quick: bool, scale: Scale | None, extra: list[str] = (),
           max_dilation: int | None = None) -> list[Point]:
    """The points of the chosen form, in order, each with its compute.scale and dilation set.

    ``max_dilation`` caps the rule's D (a smoke run's knob: above the cap the host carries more than the
    rule allows, so the point's times are not to be trusted; its notes say so)."""
    form = target.form(quick)
    keys = list(form.axes)
    points = []
    for i, combo in enumerate(itertools.product(*(form.axes[k] for k in keys))):
        values = dict(zip(keys, combo, strict=True))
        overrides = [*target.set, *form.set, *(f"{k}={v}" for k, v in values.items()
                                                       if target.engine == "model" or not is_label(k))]
        for w in target.when:
            if all(str(values.get(k)) == str(v) for k, v in w.where.items()):
                overrides += w.set
        own = scale
        if target.calibration_gpu is not None and target.engine != "model":
            own = point_scale(target, root, overrides)
        if own is not None:
            overrides.append(f"compute.scale={own.scale:.6g}")
            if own.profile_path is not None:
                overrides.append(f"compute.profile={own.profile_path}")
        overrides += list(extra)
        p = Point(i, values, overrides, engine=target.engine_of(values), calibration=own)
        if target.mixed:
            p.notes.append(f"engine: {p.engine}")
        if own is not None and own is not scale:
            p.notes.append(f"calibration: {own.describe()}")
        if p.engine == "emulate" and target.dilation == "rule":
            nodes, rate = _nodes(target, root, overrides)
            if rate:
                p.concurrent_bps = nodes * rate
                p.dilation = dilation_for(p.concurrent_bps)
                if max_dilation is not None and p.dilation > max_dilation:
                    p.notes.append(f"D capped at {max_dilation} (--max-dilation) from the rule's {p.dilation}: "
                                   f"the host carries more than the rule allows; times not to be trusted")
                    p.dilation = max_dilation
                p.overrides.append(f"run.dilation={p.dilation}")
                p.notes.append(f"D={p.dilation}: {nodes} links x {rate / 1e9:g} Gbit/s = "
                               f"{p.concurrent_bps / 1e9:g} Gbit/s at once, / D = "
                               f"{p.concurrent_bps / p.dilation / 1e9:.2f} Gbit/s on the host (rule: <= 1.5)")
        points.append(p)
    return points


def metrics_of(summary: dict, plan: dict | None, dilation: float) -> dict[str, Any]:
    """The scalar metrics of one run; fitted a, b converted to emulated seconds (host / D)."""
    it = summary["iteration_seconds"]["mean"]
    compute = summary.get("compute_seconds_mean")
    workers = summary.get("workers")
    row: dict[str, Any] = {
        "iteration_s": it, "throughput": summary.get("throughput_samples_per_s"), "compute_s": compute,
        "comm_wait_s": summary.get("comm_wait_seconds_mean"), "workers": workers,
        # MG-WFBP Fig. 10's speedup: N x single-worker compute time / iteration time
        "speedup": workers * compute / it if workers and compute and it else None,
        "dilation": dilation,
    }
    fit = (plan or {}).get("cost_fit") or {}
    if plan and "a" in plan and "b" in plan:
        row["fit_a_s"], row["fit_b_s_per_byte"] = plan["a"] / dilation, plan["b"] / dilation
        row["fit_a_host_s"], row["fit_r2"] = plan["a"], fit.get("r2")
    groups = (plan or {}).get("groups")
    if groups is not None:
        row["merged_groups"] = len(groups)
    return row


def _read_json(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.exists() else None


def run_emulated(target: Target, root: Path, point: Point, run_dir: Path, log: Callable[[str], None]) -> dict:
    """``synclab run`` in a child process (it inherits this environment, PYTHONPATH included)."""
    spec = locate(target.spec, root)
    cmd = [sys.executable, "-m", "synclab", "run", str(spec), "--out", str(run_dir), "--no-report"]
    for o in point.overrides:
        cmd += ["--set", o]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=root, env=dict(os.environ))
    (run_dir / "reproduce.log").write_text(r.stdout + r.stderr)
    if r.returncode:
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        raise RuntimeError(f"point {point.id}: synclab run exited {r.returncode}: {' | '.join(tail)}")
    summary = _read_json(run_dir / "summary.json")
    if summary is None:
        raise RuntimeError(f"point {point.id}: no summary.json in {run_dir}")
    plan = _read_json(run_dir / "plan.json")
    row = metrics_of(summary, plan, point.dilation)
    extra = {}
    if plan and plan.get("cost_fit", {}).get("sizes"):
        f = plan["cost_fit"]
        extra["fit_sizes_bytes"] = f["sizes"]
        extra["fit_median_s"] = [t / point.dilation for t in f["median_seconds"]]
        row["smallest_allreduce_s"] = extra["fit_median_s"][0]  # a without the fit's leverage
    if target.paper == "Stanza" and _closed_form(summary.get("strategy")):
        try:  # Stanza Fig. 6b/c bytes and Fig. 7's eq. 3/6 (synclab.reproduce.stanza_data)
            row.update(_stanza_metrics(target, root, point, run_dir, summary, plan))
        except (ValueError, KeyError, OSError) as e:  # the other metrics stand; claims on these are "not run"
            log(f"  point {point.id}: no Stanza data/model metrics: {e}")
    if summary.get("link_rate_bps") and (run_dir / "traffic-worker0.csv").exists():
        from synclab.reproduce.utilization import machine_utilization

        try:  # P3 Fig. 8/9: worker machine 0's 10 ms tx/rx trace (synclab.reproduce.utilization)
            util, trace = machine_utilization(run_dir, summary, point.dilation)
        except (ValueError, KeyError, OSError) as e:  # the other metrics stand; claims on these are "not run"
            log(f"  point {point.id}: no utilization metrics: {e}")
        else:
            row.update(util)
            extra.update(trace)
    # The final parameters of a replayed model are no result of a reproduction, and at 100-250 MB per point
    # (ResNet-50 to ResNet-152) a sweep's params.pt files filled this VM's disk (2026-11-26); the records stay.
    (run_dir / "params.pt").unlink(missing_ok=True)
    busy = (summary.get("host_cpu") or {}).get("busy_fraction")  # how busy the host's cores were (records from 2026-11-27 on)
    return {"metrics": row, "extra": extra, **({"host_busy": busy} if busy is not None else {})}


def _stanza_metrics(target: Target, root: Path, point: Point, run_dir: Path, summary: dict,
                    plan: dict | None) -> dict[str, Any]:
    """Bytes per iteration/epoch and the paper's model of the point, from the profile the run replayed."""
    from synclab.compute.profile import load_model_profile
    from synclab.config import load_spec, parse_override
    from synclab.report.records import ITERATIONS_FILE, read_iterations
    from synclab.reproduce.stanza_data import data_metrics, model_metrics

    spec = load_spec(locate(target.spec, root), [parse_override(o) for o in point.overrides])
    name = spec.compute.profile
    if not isinstance(name, str):
        raise ValueError("compute.profile must name the replayed profile file (its boundary gives P_c, P_f, A)")
    profile = load_model_profile(locate(name, root))
    if profile.boundary is None:
        raise ValueError(f"{name} has no 'boundary' (CONV/FC split)")
    rows = read_iterations(run_dir / ITERATIONS_FILE)
    return {**data_metrics(rows, summary, plan, profile.boundary), **model_metrics(summary, plan, profile.boundary)}


def run_simulated(target: Target, root: Path, point: Point, run_dir: Path, log: Callable[[str], None]) -> dict:
    """One simulation (:func:`synclab.sim.run.simulate`), records written as ``synclab simulate`` does."""
    from synclab.sim.records import write_run
    from synclab.sim.run import DEFAULT_STARTUP_S, load_for_simulation, simulate

    spec, workers = load_for_simulation(locate(target.spec, root), point.overrides)
    startup = DEFAULT_STARTUP_S if target.startup_s is None else target.startup_s
    summary = write_run(simulate(spec, startup_s=startup, workers=workers, record_events=False), run_dir)
    return {"metrics": metrics_of(summary, summary.get("merge_plan"), 1.0), "extra": {}}


def run_modelled(target: Target, root: Path, point: Point, run_dir: Path, log: Callable[[str], None]) -> dict:
    """Stanza's performance models (eq. 2-7) at the point's inputs (:mod:`synclab.reproduce.perfmodel`);
    T_ps is the calibration row (model.name, ``calibration_gpu``, model.batch_size)."""
    from synclab.reproduce.calibration import load_calibration
    from synclab.reproduce.perfmodel import boundary_profile, evaluate, parse_inputs

    inputs = parse_inputs(point.overrides)
    entry = load_calibration(locate(CALIBRATION, root)).find(
        inputs.model, target.calibration_gpu, inputs.batch_size)
    path, boundary = boundary_profile(inputs.model, inputs.batch_size)
    metrics = evaluate(inputs, entry.seconds, boundary)
    extra = {"calibration": {"model": entry.model, "gpu": entry.gpu, "batch_size": entry.batch_size,
                             "seconds": entry.seconds, "kind": entry.kind, "source": entry.source},
             "boundary_profile": path.name}
    write_atomic(run_dir / "model.json", json.dumps({"inputs": inputs.__dict__, **extra, "metrics": metrics},
                                                   indent=1) + "\n")
    return {"metrics": metrics, "extra": extra}


RUNNERS = {"emulate": run_emulated, "simulate": run_simulated, "model": run_modelled}


def _closed_form(strategy: str | None) -> str | None:
    """The Stanza closed form of a recorded run's strategy (``Strategy.closed_form``); None for none or an
    unknown name."""
    from synclab.reproduce.perfmodel import closed_form

    try:
        return closed_form(strategy) if strategy else None
    except ValueError:
        return None
