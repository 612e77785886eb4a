"""``synclab profile``: measure a zoo model's per-tensor times into a model profile."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
import yaml

from synclab.cli._common import console, fail


def profile(model: str = typer.Argument(..., help="Zoo model name."),
            batch: Optional[int] = typer.Option(None, "--batch", help="Batch size (default: the paper's)."),
            device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
            out: Optional[Path] = typer.Option(None, "--out", help="Output JSON (default profiles/<model>-b<B>-<device>.json)."),
            iterations: int = typer.Option(10, "--iterations", min=1, help="Timed iterations (medians are kept)."),
            warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed iterations first."),
            option: list[str] = typer.Option([], "--option", help="Model option key=value (repeatable)."),
            threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads (CPU).")):
    """Measure MODEL's per-tensor forward/backward times and write a model profile (JSON) for replay and planning."""
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
    out.write_text(prof.to_json())
    sp = prof.spread
    console.print(f"{prof.label()}: forward {prof.forward_seconds * 1e3:.2f} ms, backward "
                  f"{prof.backward_seconds * 1e3:.2f} ms, update {prof.update_seconds * 1e3:.2f} ms, "
                  f"{len(prof.tensors)} tensors, {prof.params:,} params; "
                  f"spread across iterations (max-min)/median: forward "
                  f"{sp['forward_seconds']['relative_spread']:.1%}, backward {sp['backward_seconds']['relative_spread']:.1%}")
    console.print(f"profile: {out}")
