"""Issue-6 targets for replay compute, measured in one run and printed as ratios.

1. Accuracy: ``local`` strategy, unshaped, one worker replaying a profile — the
   iteration time over the profile's forward+backward time (after
   ``compute.scale``); target within 3%. Also the compute part alone, and the
   iteration over forward+backward+update: ``local`` replays the profile's
   optimizer step (``update_seconds`` × scale) after backward, where a profile
   has it; ``--accuracy`` lists the profiles (model:scale) to check.
2. Scale: 16 replay workers + 4 PS shards of a ResNet-50 profile (``ps``
   strategy, a shaped profile) on this host, dilated by D — the per-iteration
   scheduling error as a fraction of the iteration time; target under 5%.
3. Dilation: the same experiment at 2D — the de-dilated iteration times of
   the two runs; target within 5%.

    python benchmarks/replay_bench.py [--model resnet50] [--scale 0.01] [--dilation 4]
        [--rate 1gbit | --profile 1gbit] [--iterations 5] [--out runs/replay-bench]

``--scale 0.01`` turns this machine's CPU profile of ResNet-50 into roughly a
V100's iteration time (the CPU profile is ~100x slower); with a GPU profile
checked in, use 1.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(out: Path, *sets: str) -> dict:
    cmd = [sys.executable, "-m", "synclab", "run", str(REPO / "examples" / "quickstart.yaml"), "--out", str(out),
           "--no-report"]
    for s in sets:
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"run failed ({' '.join(sets)}):\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    return json.loads((out / "summary.json").read_text())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="resnet50")
    ap.add_argument("--accuracy", default="resnet20:1,resnet50:0.01", help="model:scale pairs for the local runs")
    ap.add_argument("--scale", type=float, default=0.01)
    ap.add_argument("--dilation", type=float, default=4.0)
    ap.add_argument("--rate", default="1gbit", help="egress rate of every node of the 16+4 cluster")
    ap.add_argument("--profile", default=None, help="a link profile instead of --rate (e.g. 1gbit: both ways)")
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--shards", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1, help="leading iterations left out of the cluster figures")
    ap.add_argument("--out", type=Path, default=Path("runs/replay-bench"))
    args = ap.parse_args()

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    replay = [f"model.name={args.model}", "compute.mode=replay", f"compute.scale={args.scale}"]
    results = {}
    accuracy = [(m, float(k)) for m, k in (x.split(":") for x in args.accuracy.split(",") if x)]
    with Progress() as progress:
        task = progress.add_task("replay benchmark", total=2 + len(accuracy))
        for model, scale in accuracy:
            s = run(args.out / f"local-{model}", f"model.name={model}", "compute.mode=replay",
                    f"compute.scale={scale}", "strategy.name=local", "cluster.workers=1", "network.rate=null",
                    "run.iterations=12", "run.warmup=2")
            due = s["compute_replay_seconds"]
            update = (s.get("compute_profile_update_seconds") or 0.0) * scale
            results[f"local-{model}"] = {"scale": scale, "iteration_s": s["iteration_seconds"]["mean"],
                                         "compute_s": s["compute_seconds_mean"], "due_s": due,
                                         "update_s": update, "update": s.get("compute_update"),
                                         "ratio": s["iteration_seconds"]["mean"] / due,
                                         "ratio_with_update": s["iteration_seconds"]["mean"] / (due + update),
                                         "compute_ratio": s["compute_seconds_mean"] / due,
                                         "profile": s["compute_profile"]}
            progress.advance(task)
        cluster = [*replay, "strategy.name=ps", f"cluster.workers={args.workers}", f"cluster.ps_shards={args.shards}",
                   *([f"network.profile={args.profile}", "network.rate=null"] if args.profile
                     else [f"network.rate={args.rate}"]), f"run.iterations={args.iterations}",
                   f"run.warmup={args.warmup}", "run.connect_timeout_s=120", "run.heartbeat_timeout_s=120"]
        for d in (args.dilation, 2 * args.dilation):
            s = run(args.out / f"cluster-d{d:g}", *cluster, f"run.dilation={d}")
            results[f"d{d:g}"] = {"dilation": d, "iteration_s": s["iteration_seconds"]["mean"],
                                  "compute_s": s["compute_seconds_mean"], "comm_wait_s": s["comm_wait_seconds_mean"],
                                  "schedule_error": s["schedule_error"], "backend": s["network_backend"],
                                  "wall_s": s["wall_seconds"]}
            progress.advance(task)
    d1, d2 = results[f"d{args.dilation:g}"], results[f"d{2 * args.dilation:g}"]
    results["dilation_ratio"] = d2["iteration_s"] / d1["iteration_s"]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "replay-bench.json").write_text(json.dumps(results, indent=2))
    t = Table(title=f"Replay compute: {args.workers} workers + {args.shards} PS of {args.model} x{args.scale:g}, "
                    f"{args.profile or args.rate + ' egress'} links (one run, side by side)")
    for c in ("measurement", "value", "target", "met"):
        t.add_column(c)
    for model, scale in accuracy:
        loc = results[f"local-{model}"]
        t.add_row(f"local {model} x{scale:g}: iteration ÷ profiled fwd+bwd",
                  f"{loc['ratio']:.4f} ({loc['iteration_s'] * 1e3:.1f} / {loc['due_s'] * 1e3:.1f} ms)", "within 3%",
                  str(abs(loc["ratio"] - 1) <= 0.03))
        t.add_row("  compute alone ÷ profiled fwd+bwd", f"{loc['compute_ratio']:.4f}", "", "")
        t.add_row(f"  iteration ÷ profiled fwd+bwd+update (update {loc['update']})",
                  f"{loc['ratio_with_update']:.4f} (update {loc['update_s'] * 1e3:.2f} ms)", "", "")
    for d in (d1, d2):
        se = d["schedule_error"]
        t.add_row(f"{args.workers}w+{args.shards}ps D={d['dilation']:g}: scheduling error ÷ iteration (p99 / max)",
                  f"{se['fraction_p99']:.4f} / {se['fraction_max']:.4f}", "< 5%", str(se["fraction_max"] < 0.05))
        t.add_row(f"  D={d['dilation']:g}: iteration (comp / non-overlapped comm), backend {d['backend']}",
                  f"{d['iteration_s']:.3f} s ({d['compute_s']:.3f} / {d['comm_wait_s']:.3f}); host {d['wall_s']:.0f} s",
                  "", "")
    t.add_row(f"iteration at D={2 * args.dilation:g} ÷ at D={args.dilation:g} (de-dilated)",
              f"{results['dilation_ratio']:.4f}", "within 5%", str(abs(results["dilation_ratio"] - 1) <= 0.05))
    Console(width=150).print(t)


if __name__ == "__main__":
    main()
