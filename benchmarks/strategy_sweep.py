"""Every strategy on the same shaped cluster, one after another: iteration time and the split into compute
and non-overlapped communication (MG-WFBP Fig. 8's bars), the share of communication that compute hid
(``communication_hidden``, measured from the wire: see docs/explanation/fidelity.md "Two figures about overlap"), plus
throughput and bytes moved.

    python benchmarks/strategy_sweep.py [--spec examples/quickstart.yaml] [--rate 1gbit] [--workers 4]
        [--iterations 20] [--set KEY=VALUE ...] [--out runs/strategy-sweep]

Real compute by default; ``--set compute.mode=replay --set model.name=resnet50 ...`` sweeps replayed models.

``--baseline-src TREE`` (a checkout of older code, e.g. ``git worktree add --detach /tmp/before e4c936a^``)
runs every strategy with that tree's code and spec too, right before the current code's run of the same
strategy on the same links, ``--repeats`` times in turn, and prints the two mean iteration times side by side
(issue 12: "no strategy slower than before at 1 Gbit/s"); ``--lock FILE`` takes an flock around each run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
EXTRA = {"stanza": ["strategy.fc_workers=1"], "ssdsgd": ["strategy.warmup=3", "strategy.k=2"],
         "mgwfbp": ["strategy.profile_iterations=3"], "mgwfbp-opt": ["strategy.profile_iterations=3"]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=REPO / "examples" / "quickstart.yaml")
    ap.add_argument("--strategies", default="local,ps,wfbp,synceasgd,mgwfbp,mgwfbp-opt,stanza,p3,p3-slicing,"
                                            "ssdsgd,asgd")
    ap.add_argument("--rate", default="1gbit")
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--iterations", type=int, default=20)
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--out", type=Path, default=Path("runs/strategy-sweep"))
    ap.add_argument("--baseline-src", type=Path, default=None, help="an older checkout to run beside this one")
    ap.add_argument("--repeats", type=int, default=1, help="runs per strategy (and per tree), in turn")
    ap.add_argument("--lock", type=Path, default=None, help="flock this file around every run")
    args = ap.parse_args()
    if args.baseline_src is not None:
        if not (args.baseline_src / "src" / "synclab").is_dir():
            sys.exit(f"--baseline-src {args.baseline_src}: no src/synclab there")
        return before_and_now(args)

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    rows = []
    for strategy in track(args.strategies.split(","), description="strategies"):
        s = _run(REPO, args.spec, args.out / strategy, _sets(args, strategy), args.lock)
        if "error" in s:
            rows.append({"strategy": strategy, "error": s["error"]})
            continue
        rows.append({"strategy": strategy, "iteration_s": s["iteration_seconds"]["mean"],
                     "compute_s": s["compute_seconds_mean"], "comm_wait_s": s["comm_wait_seconds_mean"],
                     "throughput": s["throughput_samples_per_s"], "backend": s["network_backend"],
                     "isolation": s["network_isolation"], "bytes": sum(s["bytes_sent"].values()),
                     "final_loss": s["final_loss"], "hidden": s.get("communication_hidden"),
                     "communicating_s": s.get("communicating_seconds_mean")})
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "strategy-sweep.json").write_text(json.dumps(rows, indent=2))
    t = Table(title=f"strategies on {args.workers} workers, {args.rate} links (one run each, in turn)")
    for c in ("strategy", "iteration ms", "compute ms", "non-overlapped comm ms", "comm hidden", "samples/s",
              "MB sent", "backend", "final loss"):
        t.add_column(c, justify="right")
    for r in rows:
        if "error" in r:
            t.add_row(r["strategy"], "failed: " + r["error"][:60], "", "", "", "", "", "", "")
            continue
        t.add_row(r["strategy"], f"{r['iteration_s'] * 1e3:.1f}", f"{r['compute_s'] * 1e3:.1f}",
                  f"{r['comm_wait_s'] * 1e3:.1f}", "n/a" if r["hidden"] is None else f"{r['hidden']:.0%}",
                  f"{r['throughput']:.1f}", f"{r['bytes'] / 1e6:.0f}",
                  f"{r['backend']} ({r['isolation']})", f"{r['final_loss']:.3f}")
    Console(width=150).print(t)
    ok = [r for r in rows if "error" not in r]
    fig, ax = plt.subplots(figsize=(9, 3.5))
    ax.bar([r["strategy"] for r in ok], [r["compute_s"] * 1e3 for r in ok], label="compute")
    ax.bar([r["strategy"] for r in ok], [r["comm_wait_s"] * 1e3 for r in ok],
           bottom=[r["compute_s"] * 1e3 for r in ok], label="non-overlapped communication")
    ax.set_ylabel("ms per iteration")
    ax.set_title(f"Computation vs non-overlapped communication ({args.workers} workers, {args.rate})")
    ax.tick_params(axis="x", rotation=30)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(args.out / "strategy-sweep.png", dpi=120)
    if len(ok) < len(rows):
        sys.exit(1)


def _sets(args, strategy: str) -> list[str]:
    """The overrides of one strategy's run."""
    return [f"strategy.name={strategy}", f"network.rate={args.rate}", f"cluster.workers={args.workers}",
            f"run.iterations={args.iterations}", "run.warmup=4", *EXTRA.get(strategy, []), *args.sets]


def _run(tree: Path, spec: Path, out: Path, sets: list[str], lock: Path | None) -> dict:
    """One ``synclab run`` with ``tree``'s code; its summary, or {"error": last line}."""
    cmd = [sys.executable, "-m", "synclab", "run", str(spec), "--out", str(out.resolve()), "--no-report"]
    for s in sets:
        cmd += ["--set", s]
    if lock is not None:
        cmd = ["flock", str(lock), *cmd]
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=tree, env=env)
    if r.returncode:
        return {"error": ((r.stdout + r.stderr).strip().splitlines() or ["?"])[-1]}
    return json.loads((out / "summary.json").read_text())


def before_and_now(args) -> None:
    """Each strategy with the baseline tree's code, then with this tree's, in turn, on the same links."""
    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    spec = args.spec.resolve()
    trees = {"before": args.baseline_src.resolve(), "now": REPO}
    # a spec inside this repository is read from each tree's own copy (the keys may differ between them)
    specs = {name: tree / spec.relative_to(REPO) if spec.is_relative_to(REPO) else spec
             for name, tree in trees.items()}
    rows = []
    for strategy in track(args.strategies.split(","), description="strategies, before and now"):
        sets = _sets(args, strategy)
        times: dict[str, list[float]] = {"before": [], "now": []}
        errors = []
        for i in range(args.repeats):
            for name, tree in trees.items():
                s = _run(tree, specs[name], args.out / strategy / f"{name}-{i}", sets, args.lock)
                if "error" in s:
                    errors.append(f"{name}: {s['error']}")
                else:
                    times[name].append(s["iteration_seconds"]["mean"])
        row = {"strategy": strategy, **{f"{k}_s": v for k, v in times.items()}, "errors": errors}
        if times["before"] and times["now"]:
            row["speed_now_over_before"] = statistics.mean(times["before"]) / statistics.mean(times["now"])
        rows.append(row)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "before-and-now.json").write_text(json.dumps(rows, indent=2))
    t = Table(title=f"mean iteration time, {args.workers} workers, {args.rate}: {args.baseline_src} vs this tree "
                    f"({args.repeats} run(s) each, in turn)")
    for c in ("strategy", "before ms", "now ms", "speed now ÷ before", "errors"):
        t.add_column(c, justify="right")
    def ms(values: list[float]) -> str:
        return ", ".join(f"{x * 1e3:.0f}" for x in values) or "-"

    for r in rows:
        ratio = r.get("speed_now_over_before")
        t.add_row(r["strategy"], ms(r["before_s"]), ms(r["now_s"]), "-" if ratio is None else f"{ratio:.3f}",
                  "; ".join(r["errors"])[:60])
    Console(width=150).print(t)
    if any(r["errors"] for r in rows):
        sys.exit(1)


if __name__ == "__main__":
    main()
