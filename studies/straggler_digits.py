"""Time to a test accuracy with one straggler: SSGD (``ps``), ASGD and SSD-SGD on scikit-learn's digits.

The setup of ``studies/accuracy_digits.py`` (4 workers, one PS shard, an MLP, real PyTorch compute, unshaped
loopback, rank 0 scoring its parameters every ``--eval-every`` iterations), with the last worker's compute
``--factor`` times slower (``cluster.slowdown``; real compute sleeps the extra time). Each run is a real
``synclab run`` under the host's emulation lock (``flock /tmp/synclab-emu.lock``). Time to accuracy is the
``time_s`` of rank 0's first evaluation at or above ``--target``; the runs without a straggler are the
reference.

    python studies/straggler_digits.py [--seeds 0,1,2] [--factor 3] [--target 0.9] [--iterations 200]
        [--out runs/straggler-digits]

Writes ``time-to-accuracy.csv`` (one row per run) and ``time-to-accuracy.png`` and prints the table. A finished
run (its ``summary.json`` present) is not run again.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from accuracy_digits import REPO, TRAIN_SIZE, base_spec, read_curve  # noqa: E402

STRATEGIES = {"ssgd": ["strategy.name=ps"], "asgd": ["strategy.name=asgd"],
              "ssd-sgd-2": ["strategy.name=ssdsgd", "strategy.k=2"]}


def run_locked(spec_path: Path, out: Path, sets: list[str], seed: int) -> None:
    if (out / "summary.json").is_file():
        return
    cmd = ["flock", "/tmp/synclab-emu.lock", sys.executable, "-m", "synclab", "run", str(spec_path), "--out",
           str(out), "--no-report", "--set", f"run.seed={seed}", *[a for s in sets for a in ("--set", s)]]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if r.returncode:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{out}: synclab run failed (exit {r.returncode}):\n{tail}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--factor", type=float, default=3.0)
    ap.add_argument("--target", type=float, default=0.9)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ps-shards", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--warmup-epochs", type=float, default=5.0, help="SSD-SGD's SSGD warm-up, in epochs")
    ap.add_argument("--out", type=Path, default=Path("runs/straggler-digits"))
    args = ap.parse_args()
    import yaml

    seeds = [int(s) for s in args.seeds.split(",")]
    warmup = round(args.warmup_epochs * TRAIN_SIZE / (args.workers * args.batch))
    slow = [1.0] * (args.workers - 1) + [args.factor]
    args.out.mkdir(parents=True, exist_ok=True)
    spec_path = args.out / "spec.yaml"
    spec_path.write_text(yaml.safe_dump(base_spec(args), sort_keys=False))
    rows = []
    for label, sets in STRATEGIES.items():
        extra = [f"strategy.warmup={warmup}"] if "ssdsgd" in sets[0] else []
        for straggler in (False, True):
            for seed in seeds:
                name = f"{label}{'-straggler' if straggler else ''}"
                out = args.out / name / f"seed{seed}"
                run_locked(spec_path, out, [*sets, *extra, *([f"cluster.slowdown={slow}"] if straggler else [])],
                           seed)
                curve = read_curve(out)
                hit = next((r for r in curve if r["test_accuracy"] >= args.target), None)
                rows.append({"config": name, "seed": seed, "straggler_factor": args.factor if straggler else 1.0,
                             "time_to_target_s": None if hit is None else hit["time_s"],
                             "iteration_at_target": None if hit is None else int(hit["iteration"]),
                             "final_accuracy": curve[-1]["test_accuracy"], "final_time_s": curve[-1]["time_s"]})
                print(rows[-1], flush=True)
    with (args.out / "time-to-accuracy.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(dict.fromkeys(r["config"] for r in rows))
    means = [statistics.fmean([r["time_to_target_s"] for r in rows if r["config"] == n and r["time_to_target_s"]]
                              or [float("nan")]) for n in names]
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.bar(names, means, color=["C0" if "straggler" not in n else "C3" for n in names])
    for n in names:
        pts = [r["time_to_target_s"] for r in rows if r["config"] == n and r["time_to_target_s"]]
        ax.plot([n] * len(pts), pts, "k.", ms=5)
    ax.set_ylabel(f"seconds to {args.target * 100:.0f} % test accuracy")
    ax.set_title(f"digits, {args.workers} workers, one {args.factor:g}x slower (red); {len(seeds)} seeds", fontsize=9)
    ax.tick_params(axis="x", labelsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "time-to-accuracy.png", dpi=110)
    for n, m in zip(names, means):
        print(f"{n:>22}: {m:.2f} s to {args.target * 100:.0f} %")


if __name__ == "__main__":
    main()
