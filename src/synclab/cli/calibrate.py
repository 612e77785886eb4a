"""``synclab calibrate``: measure the host-model inputs ``synclab simulate`` reads, on this host."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from synclab.cli._common import fail
from synclab.fileio import write_atomic

app = typer.Typer(no_args_is_help=True, help="Measure what `synclab simulate` reads about the emulator's host: "
                                              "the ring's goodput share (ring-goodput), a PS shard's CPU "
                                              "(shard-cpu), the all-reduce start-up against dilation (startup), "
                                              "the worker runtime's time per tensor (tensor-cost); and check "
                                              "the replay calibration against a GPU's profiles (gpu-check).")
console = Console(stderr=True)


@app.command("ring-goodput")
def ring_goodput(csvs: list[Path] = typer.Argument(..., help="allreduce.csv files of "
                                                   "benchmarks/allreduce_vs_gloo.py."),
                 cores: float = typer.Option(2.0, "--cores", min=0.1, help="The host's cores, as synclab "
                                             "simulate --host-cpu."),
                 out: Path = typer.Option(Path("ring-goodput.csv"), "--out", help="The table to write (what "
                                          "`synclab simulate --ring-goodput FILE` reads).")):
    """The link share each measured ring needs in the simulator (host modelled) to take its measured time."""
    from rich.table import Table

    from synclab.calibrate.ring_goodput import calibrate, write_csv
    from synclab.linkprofile import ProfileError
    from synclab.resources import checkout

    for p in csvs:
        if not p.is_file():
            fail(f"{p}: no such file")
    try:
        rows = calibrate(csvs, cores, checkout())
    except (KeyError, ValueError, ProfileError) as e:
        fail(f"cannot calibrate: {e}")
    write_csv(rows, out)
    t = Table(title="the ring alone: measured, simulated with the host model, the share that closes the gap")
    for c in ("ranks", "segment", "emulated s", "simulated s (share 1)", "share", "simulated s (share)"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["ranks"]), f"{r['segment_bytes'] / 1e3:.0f} kB", f"{r['emulated_s']:.3f}",
                  f"{r['simulated_full_share_s']:.3f}", f"{r['share']:.3f}", f"{r['simulated_s']:.3f}")
    Console(width=140).print(t)
    console.print(f"wrote {out}")


@app.command("shard-cpu")
def shard_cpu(values: int = typer.Option(25_557_032 // 2, "--values", min=1, help="Floats in the timed tensor "
                                         "(default: half of ResNet-50, one of two shards)."),
              repeats: int = typer.Option(7, "--repeats", min=1, help="Timed repeats (the median is kept)."),
              threads: Optional[int] = typer.Option(None, "--threads", min=1, help="torch threads (default: "
                                                    "torch's, as the PS role)."),
              as_json: bool = typer.Option(False, "--json", help="Print the measurement as JSON.")):
    """A PS shard's push (add_), update (sgd_momentum_) and reply (clone) in ns per value: --shard-cpu's input."""
    from synclab.calibrate.shard_cpu import measure

    m = measure(values, repeats, threads)
    if as_json:
        typer.echo(json.dumps({"values": values, **m}))
        return
    typer.echo(f"{values} values, {m['threads']} thread(s): clone {m['clone_s'] * 1e9:.2f} ns/value, "
               f"add_ {m['add_s'] * 1e9:.2f}, sgd_momentum_ {m['update_s'] * 1e9:.2f}")
    typer.echo(f"--shard-cpu {m['push_s'] * 1e9:.2f},{m['update_s'] * 1e9:.2f},{m['reply_s'] * 1e9:.2f}")


@app.command("startup")
def startup(points: str = typer.Option("2:1,2:2,2:4,2:8,4:2,4:4,4:8", "--points", help="WORKERS:D pairs, "
                                       "comma-separated."),
            repeats: int = typer.Option(1, "--repeats", min=1),
            rate: str = typer.Option("1gbit", "--rate", help="network.rate of every run."),
            spec: str = typer.Option("quickstart", "--spec", help="Base spec: a YAML file or a packaged example."),
            lock: Optional[str] = typer.Option(None, "--lock", help="flock this file around each run (a host "
                                               "shared by several jobs)."),
            out: Path = typer.Option(Path("runs/startup-dilation"), "--out", help="Run directory; finished runs "
                                     "are reused."),
            simulate: bool = typer.Option(False, "--simulate", help="Also simulate each run's spec (--host-cpu 2)."),
            sim_arg: list[str] = typer.Option([], "--sim-arg", help="An argument for `synclab simulate` "
                                              "(e.g. --sim-arg=--no-tbf-bucket)."),
            sim_tag: str = typer.Option("", "--sim-tag", help="Suffix of the simulated runs' directory (sim<TAG>).")):
    """The emulator's all-reduce fit T(M) = a + b*M against dilation: what --startup takes (MG-WFBP eq. 10)."""
    from synclab.calibrate.startup import parse_points, sweep
    from synclab.resources import spec_path

    try:
        pairs = parse_points(points)
    except ValueError as e:
        fail(str(e))
    base = spec_path(spec)
    if not base.is_file():
        fail(f"spec {spec!r} is neither a file nor a packaged example (synclab examples)")
    rows = sweep(base, pairs, out, repeats=repeats, rate=rate, lock=lock, simulate=simulate,
                 sim_args=list(sim_arg), sim_tag=sim_tag, log=console.print)
    console.print(f"wrote {out}/startup-dilation.csv, .json")
    if any("error" in r for r in rows):
        raise typer.Exit(1)


@app.command("tensor-cost")
def tensor_cost(model: str = typer.Option("resnet50", "--model"),
                batch: int = typer.Option(32, "--batch", min=1),
                scale: float = typer.Option(0.01, "--scale", min=0.0, help="compute.scale of the replay."),
                dilations: str = typer.Option("1,2,4,8", "--dilations", help="run.dilation values, comma-separated."),
                strategies: str = typer.Option("wfbp,synceasgd", "--strategies", help="All-reduce strategies whose "
                                               "path is timed (world = 1: the ring returns at once)."),
                iterations: int = typer.Option(30, "--iterations", min=2, help="Iterations (the first is a "
                                               "warm-up)."),
                json_out: Optional[Path] = typer.Option(None, "--json", help="Also write the rows as JSON.")):
    """The worker runtime's host time per tensor beside the ring: what --tensor-us takes."""
    from synclab.calibrate.tensor_cost import measure

    try:
        ds = [float(d) for d in dilations.split(",")]
    except ValueError:
        fail(f"--dilations must be comma-separated numbers, got {dilations!r}")
    load0 = os.getloadavg()
    try:
        rows = [measure(model, batch, scale, d, iterations, s) for s in strategies.split(",") for d in ds]
    except (KeyError, ValueError) as e:
        fail(str(e))
    load1 = os.getloadavg()
    typer.echo(f"load average before {load0[0]:.2f} / after {load1[0]:.2f} (1 min); {os.cpu_count()} CPUs")
    typer.echo("strategy   D     tensors  wall/tensor mean  median   min      max      CPU/tensor (host us)")
    for r in rows:
        typer.echo(f"{r['strategy']:10s} {r['dilation']:<5g} {r['tensors']:7d}  "
                   f"{r['wall_s_per_tensor_mean'] * 1e6:8.1f}  {r['wall_s_per_tensor_median'] * 1e6:8.1f} "
                   f"{r['wall_s_per_tensor_min'] * 1e6:8.1f} {r['wall_s_per_tensor_max'] * 1e6:8.1f}  "
                   f"{r['cpu_s_per_tensor_mean'] * 1e6:8.1f}")
    if json_out:
        json_out.write_text(json.dumps({"load_before": load0, "load_after": load1, "rows": rows}, indent=2))


@app.command("gpu-check")
def gpu_check(gpu_dir: Optional[Path] = typer.Option(None, "--gpu-dir", help="GPU profiles to check (default: the "
                                                     "packaged profiles/gpu-h100)."),
              cpu_dir: Optional[Path] = typer.Option(None, "--cpu-dir", help="CPU profiles (default: the packaged "
                                                     "profiles/)."),
              out: Optional[Path] = typer.Option(None, "--out", help="The page to write (default: "
                                                 "docs/results/gpu-check.md of this checkout)."),
              no_sim: bool = typer.Option(False, "--no-sim", help="Skip part 4 (the simulations)."),
              compare_dir: Optional[Path] = typer.Option(None, "--compare-dir", help="Another GPU's profiles, "
                                                         "compared in part 5.")):
    """The replay calibration against a lent GPU's profiles: regenerates docs/results/gpu-check.md.

    In a checkout (no --out) it runs part 4's simulations into docs/gpu/gpu-check.json, then renders the page
    from that record and the profiles (as `synclab docs` does); with --out it writes one page straight away."""
    from rich.progress import track

    from synclab.calibrate.gpu_check import GpuCheckError, page, record, report
    from synclab.resources import checkout

    def progress(jobs, description):
        return track(jobs, description=description, console=console)

    root = checkout() if out is None else None
    if out is None and root is None:
        fail("outside a checkout name the page with --out")
    try:
        if root is not None:
            out = root / "docs" / "results" / "gpu-check.md"
            rec = record(root, gpu_dir, cpu_dir, compare_dir=compare_dir, no_sim=no_sim, track=progress)
            console.print(f"wrote {rec}")
            text = page(root)
        else:
            text = report(gpu_dir, cpu_dir, no_sim=no_sim, compare_dir=compare_dir, track=progress)
    except GpuCheckError as e:
        fail(str(e))
    except RuntimeError as e:  # a simulation failed
        fail(str(e), 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(out, text)
    console.print(f"wrote {out}")
