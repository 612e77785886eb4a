"""Sanity check of replay compute: the same experiment with real PyTorch compute and replayed from a profile
measured on this CPU, iteration times side by side.

1. ``synclab profile MODEL --threads 1`` (workers run torch with ``compute.threads: 1``).
2. For each strategy: a real run and a replay run of the same spec (same cluster, link, iterations).
3. Prints iteration time, compute and non-overlapped communication of both and their ratio; JSON + PNG.

    python studies/replay_vs_real.py [--model smallcnn] [--batch 32] [--strategies local,ps,wfbp]
        [--rate 1gbit] [--out runs/replay-vs-real]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def synclab(*args: str) -> None:
    r = subprocess.run([sys.executable, "-m", "synclab", *args], capture_output=True, text=True, cwd=REPO)
    if r.returncode != 0:
        sys.exit(f"synclab {' '.join(args)} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="smallcnn")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--strategies", default="local,ps,wfbp")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--iterations", type=int, default=12)
    ap.add_argument("--out", type=Path, default=Path("runs/replay-vs-real"))
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    args.out.mkdir(parents=True, exist_ok=True)
    profile = args.out / f"{args.model}-b{args.batch}-cpu.json"
    synclab("profile", args.model, "--batch", str(args.batch), "--threads", "1", "--iterations", "10",
            "--warmup", "3", "--out", str(profile))
    common = [f"model.name={args.model}", f"model.batch_size={args.batch}", f"cluster.workers={args.workers}",
              f"network.rate={args.rate}", f"run.iterations={args.iterations}", "run.warmup=2", "compute.threads=1"]
    results = []
    for strategy in track(args.strategies.split(","), description="real and replay runs"):
        row = {"strategy": strategy}
        for mode in ("real", "replay"):
            out = args.out / f"{strategy}-{mode}"
            sets = common + [f"strategy.name={strategy}"]
            if mode == "replay":
                sets += ["compute.mode=replay", f"compute.profile={profile}"]
            cmd = ["run", str(REPO / "examples" / "quickstart.yaml"), "--out", str(out), "--no-report"]
            for s in sets:
                cmd += ["--set", s]
            synclab(*cmd)
            s = json.loads((out / "summary.json").read_text())
            row[mode] = {"iteration_s": s["iteration_seconds"]["mean"], "compute_s": s["compute_seconds_mean"],
                         "comm_wait_s": s["comm_wait_seconds_mean"]}
        row["ratio"] = row["replay"]["iteration_s"] / row["real"]["iteration_s"]
        results.append(row)
    (args.out / "replay-vs-real.json").write_text(json.dumps(results, indent=2))
    t = Table(title=f"{args.model} batch {args.batch}, {args.workers} workers, {args.rate}: real vs replay "
                    f"(profile measured on this CPU)")
    for c in ("strategy", "real: iter (comp / wait) ms", "replay: iter (comp / wait) ms", "replay ÷ real"):
        t.add_column(c, justify="right")
    f = lambda r: f"{r['iteration_s'] * 1e3:.1f} ({r['compute_s'] * 1e3:.1f} / {r['comm_wait_s'] * 1e3:.1f})"  # noqa: E731
    for r in results:
        t.add_row(r["strategy"], f(r["real"]), f(r["replay"]), f"{r['ratio']:.3f}")
    Console(width=140).print(t)
    fig, ax = plt.subplots(figsize=(7, 3.5))
    x = range(len(results))
    for k, (mode, off) in enumerate((("real", -0.2), ("replay", 0.2))):
        comp = [r[mode]["compute_s"] * 1e3 for r in results]
        wait = [r[mode]["comm_wait_s"] * 1e3 for r in results]
        ax.bar([i + off for i in x], comp, width=0.4, color=f"C{k}", label=f"{mode}: compute")
        ax.bar([i + off for i in x], wait, width=0.4, bottom=comp, color=f"C{k}", alpha=0.45,
               label=f"{mode}: non-overlapped comm")
    ax.set_xticks(list(x), [r["strategy"] for r in results])
    ax.set_ylabel("ms per iteration")
    ax.set_title("Real vs replayed compute")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(args.out / "replay-vs-real.png", dpi=120)


if __name__ == "__main__":
    main()
