"""``synclab simulate``: the discrete-event simulator (:mod:`synclab.sim`) from the command line."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

console = Console(stderr=True)


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


def simulate(spec: Path = typer.Argument(..., help="Experiment spec (YAML), the one `synclab run` takes, or a "
                                         "packaged example by name (see synclab examples)."),
             set_: list[str] = typer.Option([], "--set", help="Override a spec key: dotted.key=value (repeatable)."),
             sweep: Optional[str] = typer.Option(None, "--sweep", help="KEY=V1,V2,...: simulate one point per value."),
             out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<time>-sim-<strategy>)."),
             as_json: bool = typer.Option(False, "--json", help="Print the summary (or the sweep's summaries) as JSON."),
             startup: Optional[float] = typer.Option(None, "--startup", help="Per-message start-up cost a in seconds "
                                                     "(default: the value measured on the emulator, see synclab.sim.run)."),
             host_cpu: Optional[float] = typer.Option(None, "--host-cpu", help="Model the emulator's host: all nodes' "
                                                      "data plane on this many shared cores (validation; default off)."),
             cpu_s_per_gb: Optional[float] = typer.Option(None, "--cpu-s-per-gb", help="With --host-cpu: host CPU "
                                                          "seconds per GB moved (default: the measured value, "
                                                          "see synclab.sim.run)."),
             serial_s_per_gb: Optional[float] = typer.Option(None, "--serial-s-per-gb", help="With --host-cpu: of "
                                                             "those, the seconds per GB spent after a message is in "
                                                             "(not overlapped with the wire; default measured)."),
             no_tbf_bucket: bool = typer.Option(False, "--no-tbf-bucket", help="With --host-cpu: leave out the "
                                                "emulator's shaper buckets (a burst after an idle spell passing "
                                                "without wire time; an ablation)."),
             tensor_us: Optional[float] = typer.Option(None, "--tensor-us", help="With --host-cpu: the worker "
                                                       "runtime's host microseconds per tensor beside the ring "
                                                       "(all-reduce strategies; default: the measured value, see "
                                                       "synclab.sim.run; 0 leaves it out)."),
             ring_goodput: Optional[str] = typer.Option(None, "--ring-goodput", help="With --host-cpu: the share "
                                                        "of TCP goodput the emulator's ring all-reduce reaches "
                                                        "alone, by ring size and segment: N:SHARE, "
                                                        "N:SEGMENT_BYTES:SHARE, or allreduce.csv files "
                                                        "of benchmarks/allreduce_vs_gloo.py (default: 1)."),
             shard_cpu: Optional[str] = typer.Option(None, "--shard-cpu", help="PUSH,UPDATE,REPLY: the PS shards' "
                                                     "host CPU in ns per value (synclab calibrate shard-cpu measures "
                                                     "it); default off, the papers' PS machines.")):
    """Simulate SPEC on a simulated clock (SimPy): same profiles, plans and links; writes run records."""
    from synclab.config import SpecError
    from synclab.resources import spec_path
    from synclab.sim.goodput import parse_ring_goodput
    from synclab.sim.records import write_run, write_sweep
    from synclab.sim.run import (
        DEFAULT_CPU_S_PER_BYTE,
        DEFAULT_SERIAL_S_PER_BYTE,
        DEFAULT_STARTUP_S,
        load_for_simulation,
    )
    from synclab.sim.run import simulate as run_sim

    if (cpu_s_per_gb is not None or serial_s_per_gb is not None or no_tbf_bucket or tensor_us is not None
            or ring_goodput is not None) and host_cpu is None:
        _fail("--cpu-s-per-gb, --serial-s-per-gb, --no-tbf-bucket, --tensor-us and --ring-goodput need "
              "--host-cpu CORES")
    if tensor_us is not None and not tensor_us >= 0:
        _fail(f"--tensor-us must be >= 0 microseconds, got {tensor_us}")
    cpu_s_per_byte = DEFAULT_CPU_S_PER_BYTE if cpu_s_per_gb is None else cpu_s_per_gb * 1e-9
    serial_s_per_byte = DEFAULT_SERIAL_S_PER_BYTE if serial_s_per_gb is None else serial_s_per_gb * 1e-9
    tensor_s = None if tensor_us is None else tensor_us * 1e-6  # None: the measured value of the path
    goodput = None
    if ring_goodput is not None:
        try:
            goodput = parse_ring_goodput(ring_goodput)
        except ValueError as e:
            _fail(str(e))

    cpu = None
    if shard_cpu is not None:
        from synclab.sim.strategies import ShardCpu

        try:
            push, update, reply = (float(x) * 1e-9 for x in shard_cpu.split(","))
            cpu = ShardCpu(push, update, reply)
        except ValueError as e:
            _fail(f"--shard-cpu {shard_cpu!r} must be three numbers >= 0, ns per value: PUSH,UPDATE,REPLY ({e})")
    points: list[tuple[str, list[str]]] = [("", list(set_))]
    key = None
    if sweep is not None:
        key, sep, values = sweep.partition("=")
        if not sep or not key or not values:
            _fail(f"--sweep {sweep!r} must look like dotted.key=v1,v2,...")
        points = [(v, [*set_, f"{key}={v}"]) for v in values.split(",")]
    results = []
    try:
        loaded = [(v, *load_for_simulation(spec_path(spec), ov)) for v, ov in points]
    except SpecError as e:
        _fail(f"invalid spec: {e}")
    s0 = loaded[0][1]
    base = out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-sim-{s0.strategy.name}"
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, disable=len(loaded) == 1) as progress:
        task = progress.add_task(f"simulating {key or 'spec'}", total=len(loaded))
        for value, s, workers in loaded:
            try:
                r = run_sim(s, startup_s=DEFAULT_STARTUP_S if startup is None else startup, workers=workers,
                            host_cores=host_cpu, cpu_s_per_byte=cpu_s_per_byte,
                            serial_s_per_byte=serial_s_per_byte, shard_cpu=cpu, tbf_bucket=not no_tbf_bucket,
                            tensor_s=tensor_s, ring_goodput=goodput)
            except SpecError as e:
                _fail(f"invalid spec: {e}")
            except ValueError as e:
                _fail(str(e))
            run_dir = base / f"{key}={value}" if key else base
            results.append((value, write_run(r, run_dir), run_dir))
            progress.update(task, advance=1)
    if key:
        csv_path, png_path = write_sweep([(v, s) for v, s, _ in results], key, base)
        console.print(f"sweep: {csv_path}, {png_path}")
    if as_json:
        payload = results[0][1] if not key else [{key: v, **s} for v, s, _ in results]
        typer.echo(json.dumps(payload, indent=2, default=str))
        return
    from synclab.report.table import iterations_text

    for value, s, run_dir in results:
        it = s["iteration_seconds"]
        console.print(f"{(key + '=' + value + ': ') if key else ''}{s['strategy']} {s['model']} x{s['workers']}: "
                      f"mean iteration {it['mean'] * 1e3:.1f} ms, {s['throughput_samples_per_s']:.1f} samples/s "
                      f"(simulated); {s['events_simulated']:,} events in {s['wall_seconds']:.2f} s = "
                      f"{s['events_per_second']:,.0f} events/s -> {run_dir}")
        console.print(f"  iterations: {iterations_text(s)}")
