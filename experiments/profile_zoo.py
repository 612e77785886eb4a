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
    args = ap.parse_args()
    failed = []
    jobs = [(model, batch) for model in args.models.split(",")
            for batch in PAPER_BATCHES[model][: None if args.batches == "all" else 1]]
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


if __name__ == "__main__":
    main()
