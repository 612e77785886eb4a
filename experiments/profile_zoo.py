"""Profile every zoo model at the papers' batch sizes and write ``profiles/<model>-b<B>-<device>.json``.

The batch sizes are :data:`synclab.compute.profile.PAPER_BATCHES` (MG-WFBP Table 4,
Stanza Table 5, P3 §5, SSD-SGD §4.1): every one listed, or with ``--batches primary``
only the first of each model. On a GPU machine this is the command that produces the
checked-in GPU profiles::

    python experiments/profile_zoo.py --device cuda
    python experiments/profile_zoo.py --device cpu --batches primary --iterations 3 --warmup 1 --models resnet50,vgg16

On a lent GPU machine with little time, ``--in-process`` profiles every job in this one process (one CUDA
start-up instead of one per job), ``--tf32 off`` keeps convolutions and matrix products in true FP32 (the
papers' K80, P4000 and V100 have no TF32; PyTorch lets cuDNN use it on Ampere and later by default), and
``--plain N`` also times N whole iterations with no per-layer synchronization
(``meta.plain_iteration_seconds``), so the profiler's own synchronization cost is on record::

    python experiments/profile_zoo.py --device cuda --in-process --tf32 off --plain 20 --out-dir profiles/gpu-h100

Each model runs in its own process (``synclab profile``), so one that fails
(e.g. out of memory) is reported and the rest go on.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time


def main() -> None:
    from synclab.compute.profile import PAPER_BATCHES, REPO_PROFILES, profile_file_name
    from synclab.models import MODEL_NAMES

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    ap.add_argument("--models", default=",".join(MODEL_NAMES))
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--out-dir", default=str(REPO_PROFILES))
    ap.add_argument("--batches", default="all", choices=["all", "primary"],
                    help="every batch size the papers used, or only the first of each model")
    ap.add_argument("--skip-existing", action="store_true")
    ap.add_argument("--in-process", action="store_true",
                    help="profile every job in this process (one CUDA start-up) instead of one process each")
    ap.add_argument("--tf32", default="default", choices=["default", "off"],
                    help="off: no TF32 in cuDNN convolutions or matrix products (true FP32, as the papers' GPUs)")
    ap.add_argument("--plain", type=int, default=0,
                    help="also time this many whole iterations without per-layer synchronization")
    ap.add_argument("--update-only", action="store_true",
                    help="add update_seconds (one optimizer step, measured alone) to existing profiles that lack it")
    args = ap.parse_args()
    failed = []
    jobs = [(model, batch) for model in args.models.split(",")
            for batch in PAPER_BATCHES[model][: None if args.batches == "all" else 1]]
    if args.update_only:
        add_update_seconds(jobs, args)
        return
    if args.in_process:
        profile_in_process(jobs, args)
        return
    if args.tf32 != "default" or args.plain:
        sys.exit("--tf32 and --plain apply with --in-process only (synclab profile has neither)")
    for model, batch in jobs:
        out = f"{args.out_dir}/{profile_file_name(model, batch, args.device)}"
        if args.skip_existing and os.path.exists(out):
            continue
        t0 = time.time()
        r = subprocess.run([sys.executable, "-m", "synclab", "profile", model, "--batch", str(batch), "--device",
                            args.device, "--iterations", str(args.iterations), "--warmup", str(args.warmup),
                            "--out", out], capture_output=True, text=True)
        tail = (r.stdout + r.stderr).strip().splitlines()[-3:]
        print(f"{model} b{batch}: {'ok' if r.returncode == 0 else 'FAILED'} in {time.time() - t0:.0f} s; "
              + " ".join(tail), flush=True)
        if r.returncode:
            failed.append(f"{model} b{batch}")
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


def profile_in_process(jobs: list[tuple[str, int]], args) -> None:
    """Every job in this process; a job that fails (out of memory, say) is reported and the rest go on."""
    import torch

    from synclab.compute.profile import parse_model_profile, profile_file_name
    from synclab.compute.profiler import measure_plain_iteration_seconds, measure_profile

    if args.tf32 == "off":
        torch.backends.cudnn.allow_tf32 = False
        torch.backends.cuda.matmul.allow_tf32 = False
    os.makedirs(args.out_dir, exist_ok=True)
    failed = []
    for model, batch in jobs:
        out = f"{args.out_dir}/{profile_file_name(model, batch, args.device)}"
        if args.skip_existing and os.path.exists(out):
            continue
        t0 = time.time()
        try:
            prof = measure_profile(model, batch_size=batch, device=args.device, iterations=args.iterations,
                                   warmup=args.warmup)
            data = prof.model_dump(mode="json")
            data["meta"]["tf32"] = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
            if args.plain:
                data["meta"]["plain_iteration_seconds"] = measure_plain_iteration_seconds(
                    model, batch_size=batch, device=args.device, iterations=args.plain, warmup=args.warmup)
            open(out, "w").write(parse_model_profile(data, source=out).to_json())
            plain = data["meta"].get("plain_iteration_seconds", {}).get("median")
            print(f"{model} b{batch}: ok in {time.time() - t0:.0f} s; forward {prof.forward_seconds * 1e3:.2f} ms, "
                  f"backward {prof.backward_seconds * 1e3:.2f} ms"
                  + (f", plain iteration {plain * 1e3:.2f} ms" if plain else ""), flush=True)
        except (RuntimeError, ValueError) as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
            print(f"{model} b{batch}: FAILED in {time.time() - t0:.0f} s: {str(e).splitlines()[0]}", flush=True)
            failed.append(f"{model} b{batch}")
        if args.device == "cuda":
            torch.cuda.empty_cache()
    if failed:
        sys.exit(f"failed: {', '.join(failed)}")


def add_update_seconds(jobs: list[tuple[str, int]], args) -> None:
    """Fill ``update_seconds`` into existing profiles measured before the format had it (said in their meta)."""
    import datetime

    from synclab.compute.profile import load_model_profile, parse_model_profile, profile_file_name
    from synclab.compute.profiler import measure_update_seconds

    measured: dict[str, tuple[float, dict]] = {}
    for model, batch in jobs:
        path = f"{args.out_dir}/{profile_file_name(model, batch, args.device)}"
        if not os.path.exists(path):
            continue
        prof = load_model_profile(path)
        if prof.update_seconds is not None:
            print(f"{model} b{batch}: has update_seconds {prof.update_seconds * 1e3:.2f} ms", flush=True)
            continue
        if model not in measured:  # the step does not depend on the batch size
            measured[model] = measure_update_seconds(model, device=args.device, iterations=args.iterations,
                                                     warmup=args.warmup, options=prof.options)
        med, spread = measured[model]
        data = prof.model_dump(mode="json")
        data["update_seconds"] = round(med, 9)
        data["spread"]["update_seconds"] = spread
        data["meta"]["update_method"] = (f"torch.optim.SGD step alone (random gradients), measured "
                                         f"{datetime.date.today().isoformat()}, after the forward/backward times")
        open(path, "w").write(parse_model_profile(data, source=path).to_json())
        print(f"{model} b{batch}: update_seconds {med * 1e3:.2f} ms (spread {spread['relative_spread']:.0%})",
              flush=True)


if __name__ == "__main__":
    main()
