"""Profile every zoo model at the papers' batch sizes and write ``profiles/<model>-b<B>-<device>.json``.

The batch sizes are :data:`synclab.compute.profile.PAPER_BATCHES` (MG-WFBP Table 4,
Stanza Table 5, P3 §5, SSD-SGD §4.1): every one listed, or with ``--batches primary``
only the first of each model. On a GPU machine this is the command that produces the
checked-in GPU profiles::

    python experiments/profile_zoo.py --device cuda
    python experiments/profile_zoo.py --device cpu --batches primary --iterations 3 --warmup 1 --models resnet50,vgg16

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
    ap.add_argument("--update-only", action="store_true",
                    help="add update_seconds (one optimizer step, measured alone) to existing profiles that lack it")
    args = ap.parse_args()
    failed = []
    jobs = [(model, batch) for model in args.models.split(",")
            for batch in PAPER_BATCHES[model][: None if args.batches == "all" else 1]]
    if args.update_only:
        add_update_seconds(jobs, args)
        return
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
