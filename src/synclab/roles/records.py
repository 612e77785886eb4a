"""The run records the coordinator writes at the end of a job: ``iterations.csv`` and ``summary.json``.

``iterations.csv`` is one row per (iteration, rank) as the workers reported them;
``summary.json`` the figures :func:`synclab.report.compute_summary` derives from those
rows, with what the job was (strategy, model, links, compute), where it ran and with which
versions. The coordinator's :class:`~synclab.roles.coordinator.JobState` is what both are built from.
"""

from __future__ import annotations

import csv
import logging
import math
import platform
import time
from pathlib import Path

import grpc

from synclab.config import Spec
from synclab.metrics import gcpause, hostcpu
from synclab.roles.placement import node_placement
from synclab.wire import pb

log = logging.getLogger(__name__)

ITERATION_COLUMNS = ["iteration", "rank", "phase", "start_s", "iteration_s", "compute_s", "comm_wait_s", "loss",
                     "samples", "bytes_sent", "bytes_received", "comm_span_s", "schedule_error_s", "params_checksum"]


def calibration_of(spec: Spec) -> int:
    """How many calibration iterations the job's strategy runs (``Strategy.calibration_iterations``)."""
    from synclab.strategies import registry

    return registry.get(spec.strategy.name).calibration_iterations(spec.strategy.options)


def write_iterations(path: Path, reports: list[pb.IterationReport], spec: Spec) -> list[dict]:
    """iterations.csv: one row per worker per iteration, with its ``phase``
    (:func:`synclab.report.records.iteration_phases`: warmup, calibration or steady)."""
    from synclab.report.records import iteration_phases

    phases = iteration_phases({r.iteration for r in reports}, spec.run.warmup, calibration_of(spec))
    rows = []
    for r in sorted(reports, key=lambda r: (r.iteration, r.rank)):
        rows.append({"iteration": r.iteration, "rank": r.rank, "phase": phases[r.iteration],
                     "start_s": r.start_s, "iteration_s": r.iteration_s,
                     "compute_s": r.compute_s, "comm_wait_s": r.comm_wait_s, "loss": r.loss, "samples": r.samples,
                     "bytes_sent": r.bytes_sent, "bytes_received": r.bytes_received, "comm_span_s": r.comm_span_s,
                     "schedule_error_s": "" if math.isnan(r.schedule_error_s) else r.schedule_error_s,
                     "params_checksum": "" if math.isnan(r.params_checksum) else repr(r.params_checksum)})
    with path.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=ITERATION_COLUMNS)
        w.writeheader()
        w.writerows(rows)
    return rows


def versions() -> dict[str, str]:
    import google.protobuf
    import torch

    import synclab

    return {"synclab": getattr(synclab, "__version__", "0"), "python": platform.python_version(),
            "torch": torch.__version__, "grpcio": grpc.__version__, "protobuf": google.protobuf.__version__,
            "platform": platform.platform()}


def build_summary(job, rows: list[dict], overlap: list[dict] | None = None) -> dict:
    from synclab.report import compute_summary
    from synclab.report.overlap import summarize

    spec = job.spec
    n_workers = job.expected[pb.WORKER]
    from synclab.strategies import registry

    cls = registry.get(spec.strategy.name)
    calibration = calibration_of(spec)
    figures = compute_summary(rows, warmup=spec.run.warmup, calibration=calibration, lockstep=cls.lockstep)
    if (record := cls.calibration_record(spec.strategy.options, spec.run.iterations)) is not None:
        figures["calibration"] = record
    if spec.run.eval_every:  # rank 0 wrote eval.csv before it said done
        from synclab.compute.evaluation import read_eval, summarize_eval

        figures.update(summarize_eval(read_eval(job.run_dir / "eval.csv")))
    if spec.run.events:  # spans are recorded with the events; without them there is no measure, not "none"
        figures.update(summarize(overlap or [], warmup=spec.run.warmup, calibration=calibration))
    losses: dict[int, list[float]] = {}
    for r in rows:
        losses.setdefault(r["iteration"], []).append(r["loss"])
    its = sorted(losses)
    bytes_sent = {n: int(sum(d.bytes_sent.values())) for n, d in sorted(job.done.items())}
    bytes_received = {n: int(sum(d.bytes_received.values())) for n, d in sorted(job.done.items())}
    return {
        "job_id": job.job_id,
        "name": spec.name,
        "status": "ok",
        "strategy": spec.strategy.name,
        "model": spec.model.name,
        "batch_size": spec.model.batch_size,
        "workers": n_workers,
        "ps_shards": job.expected[pb.PS],
        "iterations": spec.run.iterations,
        "warmup": spec.run.warmup,
        **figures,
        "bytes_sent": bytes_sent,
        "bytes_received": bytes_received,
        "network_backend": job.network_backend,
        "transport_security": transport_security(),
        "network_isolation": spec.network.isolation,
        "network_profile": spec.network.profile if isinstance(spec.network.profile, (str, type(None)))
        else spec.network.profile.get("name"),
        "network_app_shaping": spec.network.app_shaping,
        "link_rate_bps": job.link_rate_bps,
        "initial_loss": sum(losses[its[0]]) / len(losses[its[0]]) if its else None,
        "final_loss": sum(losses[its[-1]]) / len(losses[its[-1]]) if its else None,
        **compute_fields(spec),
        **host_cpu_field(job),
        **({"gc_pauses": pauses} if (pauses := gcpause.merge(job.run_dir)) else {}),
        "started_at": job.started_at,
        "wall_seconds": time.time() - job.started_at,
        "versions": versions(),
        "placement": {"coordinator": node_placement(), **dict(sorted(job.placement.items()))},
    }


def host_cpu_field(job) -> dict:
    """``host_cpu``: how busy the coordinator's host was from the end of the warm-up (and of the strategy's
    calibration) to the last node's end (:mod:`synclab.metrics.hostcpu`; every process of the host counts);
    left out without two samples."""
    window = hostcpu.between(*job.cpu_window[:2]) if len(job.cpu_window) >= 2 else None
    if window is None:
        return {}
    if window["saturated"]:
        log.warning("the host was %.0f %% busy over the measured iterations (%d cores): the figures are bound by "
                    "its CPU as much as by the links", 100 * window["busy_fraction"], window["cores"])
    return {"host_cpu": window}


def compute_fields(spec: Spec) -> dict:
    """How the job computed: mode, and for replay the profile, its per-iteration time, scale and dilation.

    ``compute_profile_seconds`` is the profile's forward+backward time (scale and
    dilation undone); ``compute_replay_seconds`` what one worker's iteration was
    due to compute in emulated time (× ``compute.scale``, × the batch factor of
    ``local``); ``compute_profile_update_seconds`` the profile's optimizer step
    (replayed where a worker updates its own weights; ``compute_update`` says
    whether it was). Every time in the records is already divided by ``dilation``.
    """
    out: dict = {"compute_mode": spec.compute.mode, "dilation": spec.run.dilation}
    if spec.compute.mode == "replay":
        from synclab.strategies import registry

        p = spec.compute.model_profile()
        factor = spec.cluster.workers if registry.get(spec.strategy.name).single_process else 1
        out.update(compute_profile={"model": p.model, "batch_size": p.batch_size, "device": p.device,
                                    "device_name": p.meta.get("device_name"), "date": p.meta.get("date")},
                   compute_profile_seconds=p.iteration_seconds, compute_scale=spec.compute.scale,
                   compute_replay_seconds=p.iteration_seconds * spec.compute.scale * factor,
                   compute_profile_update_seconds=p.update_seconds,
                   compute_update=("replayed from the profile" if p.update_seconds is not None
                                   else "real arithmetic on the host (the profile has no update_seconds)"))
    return out


def transport_security() -> str:
    """What protects this job's gRPC connections (the coordinator's own TLS files decide for every node)."""
    from synclab.wire.tls import TlsFiles

    return "mutual TLS (cluster CA) + job token" if TlsFiles.from_env() is not None else "job token"
