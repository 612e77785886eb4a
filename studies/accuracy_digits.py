"""Test accuracy on a real dataset: SSGD (``ps``) vs ASGD vs SSD-SGD k = 1..5 — SSD-SGD §4.2–4.3 (Fig. 4,
Table 2), reduced to scikit-learn's digits (1,437 training / 360 held-out 8x8 images) and a small MLP.

Every run is a real ``synclab run`` (coordinator, PS shard(s), 4 workers, gRPC, real PyTorch compute) with
``run.eval_every``: rank 0 scores its parameters on the held-out split (``eval.csv``). Same model, data order,
optimizer and seeds for every strategy. SSD-SGD warms up with SSGD for ``--warmup-epochs`` (default 5): the
paper's 500 iterations (§4.2: "the period of warm-up stage is set to 500 iterations in all the following
experiments") are ~5 epochs of CIFAR-10 at its global batch of 512 (4 machines x 4 GPUs x 32) — 97.7
iterations per epoch [derived]; 5 epochs of digits at 4 x 32 are 56 iterations. ASGD runs at the same lr
(what MXNet's dist_async does with one optimizer setting) and, as ``asgd-lr<lr/N>``, at lr / workers.

    python studies/accuracy_digits.py [--seeds 0,1,2] [--iterations 300] [--eval-every 25] [--lr 0.1]
        [--ks 1,2,3,4,5] [--ps-shards 1] [--out runs/accuracy-digits]

Writes ``curves.csv`` (every evaluation of every run), ``accuracy.json`` (final accuracies per configuration:
mean, sample std, min, max, per seed; host time), ``accuracy.png`` (mean test accuracy over seeds, min-max band)
and prints the table. A finished run (its ``summary.json`` present) is not run again.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRAIN_SIZE = 1_437                     # digits' training split (synclab.data.digits)
PAPER_WARMUP_ITERATIONS = 500          # SSD-SGD §4.2
PAPER_ITERATIONS_PER_EPOCH = 50_000 / (4 * 4 * 32)   # CIFAR-10, 4 machines x 4 GPUs x batch 32 (§4.1, §4.3)


@dataclass
class Config:
    label: str
    sets: list[str] = field(default_factory=list)


def configs(ks: list[int], warmup: int, workers: int, lr: float) -> list[Config]:
    out = [Config("ssgd", ["strategy.name=ps"]), Config("asgd", ["strategy.name=asgd"]),
           Config(f"asgd-lr{lr / workers:g}", ["strategy.name=asgd", f"optimizer.lr={lr / workers!r}"])]
    out += [Config(f"ssd-sgd-{k}", ["strategy.name=ssdsgd", f"strategy.k={k}", f"strategy.warmup={warmup}"])
            for k in ks]
    return out


def base_spec(args) -> dict:
    return {
        "name": "accuracy-digits",
        "cluster": {"workers": args.workers, "ps_shards": args.ps_shards},
        "network": {"isolation": "none"},  # accuracy does not depend on link shaping; unshaped loopback
        "model": {"name": "mlp", "batch_size": args.batch,
                  "options": {"input_dim": 64, "hidden": [args.hidden], "num_classes": 10}},
        "data": {"name": "digits"},
        "compute": {"mode": "real", "device": "cpu"},
        "optimizer": {"lr": args.lr, "momentum": 0.9, "weight_decay": 1e-4},
        "run": {"iterations": args.iterations, "warmup": 2, "eval_every": args.eval_every, "events": False},
    }


def run_one(spec_path: Path, out: Path, sets: list[str], seed: int) -> float:
    """One ``synclab run``; returns its host wall time (0 when it had already finished)."""
    if (out / "summary.json").is_file():
        return 0.0
    cmd = [sys.executable, "-m", "synclab", "run", str(spec_path), "--out", str(out), "--no-report",
           "--set", f"run.seed={seed}"]
    for s in sets:
        cmd += ["--set", s]
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO,
                       env={**os.environ, "PYTHONPATH": str(REPO / "src")})
    if r.returncode:
        tail = "\n".join((r.stdout + r.stderr).strip().splitlines()[-15:])
        raise RuntimeError(f"{out}: synclab run failed (exit {r.returncode}):\n{tail}")
    return time.perf_counter() - t0


def read_curve(run_dir: Path) -> list[dict]:
    with (run_dir / "eval.csv").open(newline="") as f:
        return [{k: float(v) for k, v in row.items()} for row in csv.DictReader(f)]


def summarize(final: list[float]) -> dict:
    return {"mean": statistics.fmean(final), "std": statistics.stdev(final) if len(final) > 1 else 0.0,
            "min": min(final), "max": max(final)}


def plot(path: Path, curves: dict[str, list[list[dict]]], warmup: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    cmap = plt.get_cmap("tab10")
    for i, (label, runs) in enumerate(curves.items()):
        its = np.array([r["iteration"] for r in runs[0]])
        acc = np.array([[r["test_accuracy"] * 100 for r in run] for run in runs])
        style = "--" if label.startswith("asgd") else "-"
        for ax in axes:
            ax.plot(its, acc.mean(0), style, color=cmap(i), label=f"{label} (n={len(runs)})")
            ax.fill_between(its, acc.min(0), acc.max(0), color=cmap(i), alpha=0.15)
    for ax in axes:
        ax.axvline(warmup, color="grey", lw=0.8, ls=":")
        ax.set_xlabel("iteration (global batch of 4 workers)")
        ax.set_ylabel("test accuracy (%), 360 held-out digits")
        ax.grid(alpha=0.3)
    axes[0].set_title("all")
    axes[0].text(warmup, 5, " SSD-SGD warm-up ends", fontsize=8, color="grey")
    axes[1].set_ylim(85, 100)
    axes[1].set_title("zoom: 85-100 %")
    axes[1].legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--ks", default="1,2,3,4,5")
    ap.add_argument("--iterations", type=int, default=300)
    ap.add_argument("--eval-every", type=int, default=25)
    ap.add_argument("--warmup-epochs", type=float, default=5.0, help="SSD-SGD's SSGD warm-up, in epochs")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--ps-shards", type=int, default=1)
    ap.add_argument("--batch", type=int, default=32, help="per worker")
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--out", type=Path, default=Path("runs/accuracy-digits"))
    args = ap.parse_args()

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    seeds = [int(s) for s in args.seeds.split(",")]
    ks = [int(k) for k in args.ks.split(",")]
    global_batch = args.workers * args.batch
    warmup = round(args.warmup_epochs * TRAIN_SIZE / global_batch)
    args.out.mkdir(parents=True, exist_ok=True)
    spec_path = args.out / "spec.yaml"
    import yaml

    spec_path.write_text(yaml.safe_dump(base_spec(args), sort_keys=False))
    todo = configs(ks, warmup, args.workers, args.lr)
    console = Console()
    ledger = args.out / "host-seconds.json"  # each run's host time, kept across resumed invocations
    host_s: dict[str, float] = json.loads(ledger.read_text()) if ledger.is_file() else {}
    t_all = time.perf_counter()
    with Progress(console=console) as progress:
        task = progress.add_task("runs", total=len(todo) * len(seeds))
        for c in todo:
            for seed in seeds:
                progress.update(task, description=f"{c.label} seed {seed}")
                took = run_one(spec_path, args.out / c.label / f"seed{seed}", c.sets, seed)
                if took:
                    host_s[f"{c.label}/seed{seed}"] = took
                    ledger.write_text(json.dumps(host_s, indent=1) + "\n")
                progress.advance(task)
    this_invocation_s = time.perf_counter() - t_all
    total_s = sum(host_s.get(f"{c.label}/seed{seed}", 0.0) for c in todo for seed in seeds)

    curves: dict[str, list[list[dict]]] = {}
    with (args.out / "curves.csv").open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["config", "seed", "iteration", "epoch", "test_loss", "test_accuracy"])
        for c in todo:
            curves[c.label] = []
            for seed in seeds:
                rows = read_curve(args.out / c.label / f"seed{seed}")
                curves[c.label].append(rows)
                for r in rows:
                    w.writerow([c.label, seed, int(r["iteration"]), r["epoch"], r["test_loss"], r["test_accuracy"]])

    results = {}
    for c in todo:
        final = [run[-1]["test_accuracy"] * 100 for run in curves[c.label]]
        results[c.label] = {**summarize(final), "per_seed": dict(zip(map(str, seeds), final)), "sets": c.sets}
    report = {
        "date": time.strftime("%Y-%m-%d", time.gmtime()),
        "what": "final test accuracy (%) on digits' 360 held-out images after the last iteration, rank 0's "
                "parameters (synclab.compute.evaluation); std is the sample std over seeds",
        "iterations": args.iterations, "epochs": args.iterations * global_batch / TRAIN_SIZE,
        "eval_every": args.eval_every, "seeds": seeds, "workers": args.workers, "ps_shards": args.ps_shards,
        "batch_per_worker": args.batch, "global_batch": global_batch, "lr": args.lr, "momentum": 0.9,
        "weight_decay": 1e-4, "model": f"mlp 64-{args.hidden}-10", "ssdsgd_warmup_iterations": warmup,
        "ssdsgd_warmup_epochs": args.warmup_epochs,
        "paper_warmup": (f"{PAPER_WARMUP_ITERATIONS} iterations = {PAPER_WARMUP_ITERATIONS / PAPER_ITERATIONS_PER_EPOCH:.2f}"
                         " CIFAR-10 epochs at global batch 512"),
        "results": results,
        "host": {"machine": platform.platform(), "cpus": os.cpu_count(), "load_average_at_end": os.getloadavg(),
                 "total_wall_s": total_s, "this_invocation_s": this_invocation_s, "run_wall_s": host_s},
    }
    (args.out / "accuracy.json").write_text(json.dumps(report, indent=2) + "\n")
    title = (f"digits, mlp 64-{args.hidden}-10, {args.workers} workers x batch {args.batch}, {args.ps_shards} PS "
             f"shard(s), lr {args.lr}, momentum 0.9; SSD-SGD warm-up {warmup} iterations ({args.warmup_epochs:g} "
             f"epochs); mean over seeds {args.seeds}, band min-max")
    plot(args.out / "accuracy.png", curves, warmup, title)

    table = Table(title=f"Final test accuracy (%) after {args.iterations} iterations "
                        f"({report['epochs']:.1f} epochs), {len(seeds)} seeds")
    for col in ("config", "mean", "std", "min", "max", "per seed"):
        table.add_column(col, justify="left" if col in ("config", "per seed") else "right")
    for label, r in results.items():
        table.add_row(label, f"{r['mean']:.2f}", f"{r['std']:.2f}", f"{r['min']:.2f}", f"{r['max']:.2f}",
                      "  ".join(f"{v:.2f}" for v in r["per_seed"].values()))
    console.print(table)
    console.print(f"host time {total_s:.0f} s for {len(todo) * len(seeds)} runs (this invocation "
                  f"{this_invocation_s:.0f} s); records in {args.out}; "
                  f"figure {args.out / 'accuracy.png'}")


if __name__ == "__main__":
    main()
