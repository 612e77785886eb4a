"""Run records of a simulated job, the subset ``synclab report`` reads (DESIGN "Run records"):
``spec.yaml``, ``summary.json`` (marked ``"simulated": true``), ``iterations.csv``, ``events.csv``,
``overlap.csv`` and ``timeline.json``; and a sweep's ``sweep.csv`` + ``sweep.png``.

``communication_hidden`` here is computed from the per-tensor events: a tensor is
communicating from its ``send_start`` to its ``params_fresh`` (not from wire spans, which
the simulator does not record), intersected with the worker's compute spans
(:mod:`synclab.report.overlap`'s interval functions).
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import yaml

from synclab.compute.events import COLUMNS as EVENT_COLUMNS
from synclab.compute.events import chrome_trace
from synclab.fileio import write_atomic
from synclab.report.overlap import intersect, length, summarize, union, write_overlap
from synclab.report.records import ITERATION_COLUMNS, iteration_phases
from synclab.report.summary import compute_summary
from synclab.sim.run import SimResult
from synclab.strategies import registry

ROW_COLUMNS = ITERATION_COLUMNS[:2] + ("phase",) + ITERATION_COLUMNS[2:] + ("comm_span_s",)


def calibration_of(r: SimResult) -> int:
    """The strategy's calibration iterations in this run (``Strategy.calibration_iterations``)."""
    s = r.spec
    return registry.get(s.strategy.name).calibration_iterations(s.strategy.options)


def summary_of(r: SimResult) -> dict:
    s = r.spec
    link = s.network.link_profile()
    out = {"name": s.name, "status": "ok", "simulated": True, "strategy": s.strategy.name, "model": s.model.name,
           "batch_size": s.model.batch_size, "workers": r.world, "ps_shards": s.n_ps,
           "iterations": s.run.iterations, "warmup": s.run.warmup}
    cls = registry.get(s.strategy.name)
    out.update(compute_summary(r.rows, warmup=s.run.warmup, calibration=calibration_of(r), lockstep=cls.lockstep))
    if (record := cls.calibration_record(s.strategy.options, s.run.iterations)) is not None:
        out["calibration"] = record
    out.update(bytes_sent=dict(sorted(r.bytes_sent.items())), bytes_received=dict(sorted(r.bytes_received.items())),
               network_backend="simulated", network_profile=None if link is None else link.name or "inline",
               link_rate_bps=None if link is None else link.rate_bps, message_startup_s=r.startup_s,
               host_cpu=r.host_cpu,
               initial_loss=float("nan"), final_loss=float("nan"), compute_mode="replay",
               compute_profile=r.profile_meta, compute_scale=s.compute.scale,
               simulated_seconds=r.sim_s, wall_seconds=r.wall_s, events_simulated=r.sim_events,
               events_per_second=r.sim_events / r.wall_s if r.wall_s > 0 else None, notes=r.notes)
    if r.plan is not None:
        out["merge_plan"] = {k: v for k, v in r.plan.items() if k != "cost_fit"}
    return out


def _names(r: SimResult) -> list[str]:
    from synclab.models import tensor_layout

    return list(tensor_layout(r.spec.model.name, **r.spec.model.options)[0])


def overlap_from_events(r: SimResult) -> list[dict]:
    fresh_start: dict[tuple[int, int, int], float] = {}
    comm: dict[tuple[int, int], list] = {}
    for it, rank, idx, kind, t in r.events:
        if kind == "send_start":
            fresh_start[(it, rank, idx)] = t
        elif kind == "params_fresh" and (it, rank, idx) in fresh_start:
            comm.setdefault((rank, it), []).append((fresh_start.pop((it, rank, idx)), t))
    busy: dict[int, list] = {}
    waits: dict[int, list] = {}
    for rank, kind, it, a, b in r.spans:
        (waits if kind == "gate_wait" else busy).setdefault(rank, []).append((a, b))
    out = []
    for (rank, it), spans in sorted(comm.items()):
        from synclab.report.overlap import subtract

        compute = union(subtract(union(busy.get(rank, [])), union(waits.get(rank, []))))
        talking = union(spans)
        c = length(talking)
        o = length(intersect(talking, compute))
        out.append({"worker": f"worker{rank}", "iteration": it, "communicating_s": c, "overlapped_s": o,
                    "hidden": o / c if c > 0 else None})
    return out


def write_run(r: SimResult, out: Path) -> dict:
    """Write the records into ``out``; returns the summary."""
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "spec.yaml", yaml.safe_dump(r.spec.to_dict(), sort_keys=False))
    phases = iteration_phases({row["iteration"] for row in r.rows}, r.spec.run.warmup, calibration_of(r))
    with (out / "iterations.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(ROW_COLUMNS), extrasaction="ignore")
        w.writeheader()
        for row in r.rows:
            w.writerow({"phase": phases[row["iteration"]],
                        **{k: (f"{v:.9f}" if isinstance(v, float) else v) for k, v in row.items()}})
    summary = summary_of(r)
    if r.plan is not None:  # the merge plan with its cost fit, as the emulator's plan.json has it
        write_atomic(out / "plan.json", json.dumps(r.plan, indent=2, default=str) + "\n")
    if r.events:
        names = _names(r)
        rows = [{"iteration": it, "node": f"worker{rank}", "tensor": names[idx], "event": kind, "time_s": t}
                for it, rank, idx, kind, t in r.events]
        with (out / "events.csv").open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=EVENT_COLUMNS)
            w.writeheader()
            for row in rows:
                w.writerow({**row, "time_s": f"{row['time_s']:.9f}"})
        spans = [{"node": f"worker{rank}", "kind": kind, "iteration": it, "peer": "", "key": "", "slice": 0,
                  "bytes": 0, "start_s": a, "end_s": b} for rank, kind, it, a, b in r.spans]
        (out / "timeline.json").write_text(json.dumps(chrome_trace(rows, spans)))
        overlap = overlap_from_events(r)
        write_overlap(out / "overlap.csv", overlap)
        summary.update(summarize(overlap, warmup=r.spec.run.warmup, calibration=calibration_of(r)))
    write_atomic(out / "summary.json", json.dumps(summary, indent=2, default=str) + "\n")
    return summary


def write_sweep(points: list[tuple[str, dict]], key: str, out: Path) -> tuple[Path, Path]:
    """``sweep.csv`` (one row per point) and ``sweep.png`` (mean iteration time against ``key``)."""
    from matplotlib.figure import Figure

    out.mkdir(parents=True, exist_ok=True)
    csv_path, png_path = out / "sweep.csv", out / "sweep.png"
    cols = [key, "iteration_mean_s", "throughput_samples_per_s", "comm_wait_mean_s", "events_simulated",
            "wall_seconds", "events_per_second"]
    with csv_path.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for value, s in points:
            w.writerow([value, s["iteration_seconds"]["mean"], s["throughput_samples_per_s"],
                        s["comm_wait_seconds_mean"], s["events_simulated"], s["wall_seconds"],
                        s["events_per_second"]])
    fig = Figure(figsize=(6, 4))
    ax = fig.add_subplot()
    ax.plot([str(v) for v, _ in points], [s["iteration_seconds"]["mean"] * 1e3 for _, s in points], "o-")
    ax.set_xlabel(key)
    ax.set_ylabel("mean iteration time (ms, simulated)")
    first = points[0][1]
    ax.set_title(f"{first['strategy']}, {first['model']}: simulated sweep of {key}", fontsize=9)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=120)
    return csv_path, png_path
