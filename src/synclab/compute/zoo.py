"""Profiling the whole model zoo at the papers' batch sizes (``synclab profile --zoo``): one model profile per
(model, batch) into a directory, ``<model>-b<B>-<device>.json``.

The batch sizes are :data:`synclab.compute.profile.PAPER_BATCHES` (MG-WFBP Table 4, Stanza Table 5, P3 §5,
SSD-SGD §4.1): every one listed, or only the first of each model. By default each job runs in its own process
(``synclab profile MODEL``), so one that fails (out of memory, say) is reported and the rest go on;
``in_process`` profiles every job in this one process (one CUDA start-up on a lent GPU machine), where ``tf32``
off keeps convolutions and matrix products in true FP32 (the papers' K80, P4000 and V100 have no TF32) and
``plain`` N also times N whole iterations without per-layer synchronization (``meta.plain_iteration_seconds``),
so the profiler's own synchronization cost is on record. ``update_only`` fills ``update_seconds`` into
existing profiles measured before the format had it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Callable

from synclab.fileio import write_atomic


@dataclass(frozen=True)
class ZooOptions:
    device: str = "cpu"
    out_dir: str = "profiles"
    iterations: int = 10
    warmup: int = 3
    skip_existing: bool = False
    tf32: str = "default"  # or "off"
    plain: int = 0


def zoo_jobs(models: list[str], primary_only: bool) -> list[tuple[str, int]]:
    """(model, batch) for every paper batch size of each model (the first only with ``primary_only``)."""
    from synclab.compute.profile import PAPER_BATCHES

    unknown = [m for m in models if m not in PAPER_BATCHES]
    if unknown:
        raise ValueError(f"no paper batch sizes for {', '.join(unknown)}; known: {', '.join(PAPER_BATCHES)}")
    return [(m, b) for m in models for b in PAPER_BATCHES[m][: 1 if primary_only else None]]


def _todo(jobs: list[tuple[str, int]], opts: ZooOptions) -> list[tuple[str, int, str]]:
    """(model, batch, output file) of the jobs to run: all, or those without a file with ``skip_existing``."""
    from synclab.compute.profile import profile_file_name

    out = [(m, b, f"{opts.out_dir}/{profile_file_name(m, b, opts.device)}") for m, b in jobs]
    return [j for j in out if not (opts.skip_existing and os.path.exists(j[2]))]


def profile_in_processes(jobs: list[tuple[str, int]], opts: ZooOptions,
                         log: Callable[[str], None] = print) -> list[str]:
    """Each job in its own ``synclab profile`` process; returns the failed jobs."""
    failed = []
    for model, batch, out in _todo(jobs, opts):
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "synclab", "profile", model, "--batch", str(batch), "--device",
                            opts.device, "--iterations", str(opts.iterations), "--warmup", str(opts.warmup),
                            "--out", out], capture_output=True, text=True)
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        log(f"{model} b{batch}: {'ok' if r.returncode == 0 else 'FAILED'} in {time.time() - t0:.0f} s; "
            + " ".join(tail))
        if r.returncode:
            failed.append(f"{model} b{batch}")
    return failed


def profile_in_process(jobs: list[tuple[str, int]], opts: ZooOptions,
                       log: Callable[[str], None] = print) -> list[str]:
    """Every job in this process (one CUDA start-up); a job that fails (out of memory, say) is reported and the
    rest go on. Returns the failed jobs."""
    import torch

    from synclab.compute.profile import parse_model_profile
    from synclab.compute.profiler import measure_plain_iteration_seconds, measure_profile

    if opts.tf32 == "off":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(opts.out_dir, exist_ok=True)
    failed = []
    for model, batch, out in _todo(jobs, opts):
        t0 = time.time()
        try:
            prof = measure_profile(model, batch_size=batch, device=opts.device, iterations=opts.iterations,
                                   warmup=opts.warmup)
            data = prof.model_dump(mode="json")
            data["meta"]["tf32"] = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
            if opts.plain:
                data["meta"]["plain_iteration_seconds"] = measure_plain_iteration_seconds(
                    model, batch_size=batch, device=opts.device, iterations=opts.plain, warmup=opts.warmup)
            write_atomic(out, parse_model_profile(data, source=out).to_json())
            plain = data["meta"].get("plain_iteration_seconds", {}).get("median")
            log(f"{model} b{batch}: ok in {time.time() - t0:.0f} s; forward {prof.forward_seconds * 1e3:.2f} ms, "
                f"backward {prof.backward_seconds * 1e3:.2f} ms"
                + (f", plain iteration {plain * 1e3:.2f} ms" if plain else ""))
        except (RuntimeError, ValueError) as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
            log(f"{model} b{batch}: FAILED in {time.time() - t0:.0f} s: {str(e).splitlines()[0]}")
            failed.append(f"{model} b{batch}")
        if opts.device == "cuda":
            torch.cuda.empty_cache()
    return failed


def add_update_seconds(jobs: list[tuple[str, int]], opts: ZooOptions,
                       log: Callable[[str], None] = print) -> None:
    """Fill ``update_seconds`` into existing profiles measured before the format had it (said in their meta)."""
    import datetime

    from synclab.compute.profile import load_model_profile, parse_model_profile, profile_file_name
    from synclab.compute.profiler import measure_update_seconds

    measured: dict[str, tuple[float, dict]] = {}
    for model, batch in jobs:
        path = f"{opts.out_dir}/{profile_file_name(model, batch, opts.device)}"
        if not os.path.exists(path):
            continue
        prof = load_model_profile(path)
        if prof.update_seconds is not None:
            log(f"{model} b{batch}: has update_seconds {prof.update_seconds * 1e3:.2f} ms")
            continue
        if model not in measured:  # the step does not depend on the batch size
            measured[model] = measure_update_seconds(model, device=opts.device, iterations=opts.iterations,
                                                     warmup=opts.warmup, options=prof.options)
        med, spread = measured[model]
        data = prof.model_dump(mode="json")
        data["update_seconds"] = round(med, 9)
        data["spread"]["update_seconds"] = spread
        data["meta"]["update_method"] = (f"torch.optim.SGD step alone (random gradients), measured "
                                         f"{datetime.date.today().isoformat()}, after the forward/backward times")
        write_atomic(path, parse_model_profile(data, source=path).to_json())
        log(f"{model} b{batch}: update_seconds {med * 1e3:.2f} ms (spread {spread['relative_spread']:.0%})")


