"""``synclab profile``: measure a zoo model's per-tensor times into a model profile (``--zoo``: every model at
the papers' batch sizes, :mod:`synclab.compute.zoo`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
import yaml

from synclab.cli._common import console, fail
from synclab.fileio import write_atomic


def profile(model: Optional[str] = typer.Argument(None, help="Zoo model name (not with --zoo)."),
            batch: Optional[int] = typer.Option(None, "--batch", help="Batch size (default: the paper's)."),
            device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
            out: Optional[Path] = typer.Option(None, "--out", help="Output JSON (default profiles/<model>-b<B>-<device>.json)."),
            iterations: int = typer.Option(10, "--iterations", min=1, help="Timed iterations (medians are kept)."),
            warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed iterations first."),
            option: list[str] = typer.Option([], "--option", help="Model option key=value (repeatable)."),
            threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads (CPU)."),
            zoo: bool = typer.Option(False, "--zoo", help="Profile every zoo model (or --models) at the papers' "
                                     "batch sizes into --out-dir, one file per (model, batch)."),
            models: Optional[str] = typer.Option(None, "--models", help="With --zoo: comma-separated models "
                                                 "(default: the whole zoo)."),
            batches: str = typer.Option("all", "--batches", help="With --zoo: 'all' the papers' batch sizes, or "
                                        "'primary' (the first of each model)."),
            out_dir: Optional[Path] = typer.Option(None, "--out-dir", help="With --zoo: where the profiles go "
                                                   "(default: the packaged profiles/)."),
            skip_existing: bool = typer.Option(False, "--skip-existing", help="With --zoo: keep profiles already "
                                               "there."),
            in_process: bool = typer.Option(False, "--in-process", help="With --zoo: every job in this process "
                                            "(one CUDA start-up) instead of one process each."),
            tf32: str = typer.Option("default", "--tf32", help="With --zoo --in-process: 'off' keeps cuDNN "
                                     "convolutions and matrix products in true FP32, as the papers' GPUs."),
            plain: int = typer.Option(0, "--plain", min=0, help="With --zoo --in-process: also time N whole "
                                      "iterations without per-layer synchronization."),
            update_only: bool = typer.Option(False, "--update-only", help="With --zoo: add update_seconds to "
                                             "existing profiles that lack it.")):
    """Measure MODEL's per-tensor forward/backward times and write a model profile (JSON) for replay and planning;
    with --zoo, every zoo model at the papers' batch sizes."""
    if zoo:
        _zoo(model, device, iterations, warmup, models, batches, out_dir, skip_existing, in_process, tf32, plain,
             update_only)
        return
    if model is None:
        fail("name a MODEL, or use --zoo")
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.compute.profile import PAPER_BATCH, REPO_PROFILES, profile_file_name
    from synclab.compute.profiler import measure_profile
    from synclab.models import MODEL_NAMES

    if model not in MODEL_NAMES:
        fail(f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}")
    if device not in ("cpu", "cuda"):
        fail(f"--device must be cpu or cuda, got {device!r}")
    if batch is not None and batch < 1:
        fail(f"--batch must be >= 1, got {batch}")
    options = {}
    for item in option:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            fail(f"--option {item!r} must look like key=value")
        options[key] = yaml.safe_load(raw)
    batch = batch or PAPER_BATCH.get(model, 32)
    if threads:
        import torch

        torch.set_num_threads(threads)
    out = out or REPO_PROFILES / profile_file_name(model, batch, device)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"profiling {model} (batch {batch}, {device})", total=warmup + iterations)
        try:
            prof = measure_profile(model, batch_size=batch, device=device, iterations=iterations, warmup=warmup,
                                   options=options, progress=lambda done, total: progress.update(task, completed=done))
        except (ValueError, TypeError) as e:
            fail(str(e))
        except RuntimeError as e:
            fail(str(e), 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, prof.to_json())
    sp = prof.spread
    console.print(f"{prof.label()}: forward {prof.forward_seconds * 1e3:.2f} ms, backward "
                  f"{prof.backward_seconds * 1e3:.2f} ms, update {prof.update_seconds * 1e3:.2f} ms, "
                  f"{len(prof.tensors)} tensors, {prof.params:,} params; "
                  f"spread across iterations (max-min)/median: forward "
                  f"{sp['forward_seconds']['relative_spread']:.1%}, backward {sp['backward_seconds']['relative_spread']:.1%}")
    console.print(f"profile: {out}")


def _zoo(model, device, iterations, warmup, models, batches, out_dir, skip_existing, in_process, tf32, plain,
         update_only) -> None:
    from synclab.compute.profile import REPO_PROFILES
    from synclab.compute.zoo import ZooOptions, add_update_seconds, profile_in_process, profile_in_processes, zoo_jobs
    from synclab.models import MODEL_NAMES

    if model is not None:
        fail("--zoo profiles many models: name them with --models, not as the argument")
    if device not in ("cpu", "cuda"):
        fail(f"--device must be cpu or cuda, got {device!r}")
    if batches not in ("all", "primary") or tf32 not in ("default", "off"):
        fail(f"--batches is all or primary (got {batches!r}); --tf32 is default or off (got {tf32!r})")
    if (tf32 != "default" or plain) and not in_process:
        fail("--tf32 and --plain apply with --in-process only (a `synclab profile` process has neither)")
    try:
        jobs = zoo_jobs(models.split(",") if models else list(MODEL_NAMES), batches == "primary")
    except ValueError as e:
        fail(str(e))
    opts = ZooOptions(device=device, out_dir=str(out_dir or REPO_PROFILES), iterations=iterations, warmup=warmup,
                      skip_existing=skip_existing, tf32=tf32, plain=plain)
    if update_only:
        add_update_seconds(jobs, opts, log=console.print)
        return
    failed = (profile_in_process if in_process else profile_in_processes)(jobs, opts, log=console.print)
    if failed:
        fail(f"failed: {', '.join(failed)}", 1)
