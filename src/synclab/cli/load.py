"""``synclab load``: Locust load tests of a PS shard or the coordinator (:mod:`synclab.load`)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console
from rich.table import Table

console = Console(stderr=True)


def load(target: str = typer.Option("ps", "--target", help="What to load: ps (a PS shard) or coordinator."),
         users: int = typer.Option(8, "--users", "-u", help="Concurrent Locust users (workers or nodes)."),
         duration: str = typer.Option("60s", "--duration", help="How long to load it (e.g. 20s, 2m)."),
         out: Path = typer.Option(Path("runs/load"), "--out", help="Where load.csv/json/png and Locust's CSVs go."),
         address: Optional[str] = typer.Option(None, "--address",
                                               help="An existing target host:port (default: start one on loopback)."),
         token: Optional[str] = typer.Option(None, "--token", envvar="SYNCLAB_TOKEN",
                                             help="The target's job token (needed with --address)."),
         floats: int = typer.Option(1 << 18, "--floats", help="fp32 values per pushed tensor (ps)."),
         keys: int = typer.Option(8, "--keys", help="Tensors the shard holds; users push them in turn (ps)."),
         max_streams: int = typer.Option(64, "--max-streams",
                                         help="The started target's concurrent-RPC limit; past it, RESOURCE_EXHAUSTED."),
         queue: str = typer.Option("64MiB", "--queue", help="The started shard's send queue per stream."),
         spawn_rate: float = typer.Option(100.0, "--spawn-rate", help="Users started per second."),
         web: bool = typer.Option(False, "--web", help="Locust's web UI instead of a headless run (Ctrl-C ends it)."),
         web_host: str = typer.Option("127.0.0.1", "--web-host", help="Where the web UI listens."),
         web_port: int = typer.Option(8089, "--web-port")):
    """Load a PS shard or the coordinator with Locust users speaking SyncLab's gRPC wire; print and write
    pushes/s, MB/s, p50/p99 latency and failures, and check the shard lost and doubled nothing."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.load.run import LoadError, LoadSettings, run_load
    from synclab.units import parse_duration_s, parse_size_bytes

    try:
        settings = LoadSettings(target=target, users=users, duration_s=parse_duration_s(duration, "--duration"),
                                spawn_rate=spawn_rate, address=address or None, token=token, keys=keys, floats=floats,
                                max_streams=max_streams, queue_bytes=parse_size_bytes(queue, "--queue"))
    except ValueError as e:
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(2)
    if web:  # a container's stop (SIGTERM) ends the session as Ctrl-C does, with the results written
        import signal

        stopping: list[bool] = []

        def interrupt(*_):
            if not stopping:  # a second signal (a wrapper passing it on) must not cut the results short
                stopping.append(True)
                raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, interrupt)
    what = f"{users} users -> {target} {address or '(started on loopback)'}"
    try:
        with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(),
                      TextColumn("{task.fields[rss]}"), TimeElapsedColumn(), console=console) as progress:
            task = progress.add_task(what, total=None if web else settings.duration_s, rss="")

            def tick(elapsed, info):
                rss = info.get("rss")
                progress.update(task, completed=min(elapsed, settings.duration_s) if not web else None,
                                rss=f"target RSS {rss / 2**20:.0f} MiB" if rss else "")

            result = run_load(settings, out, web=web, web_host=web_host, web_port=web_port, on_tick=tick)
    except ValueError as e:  # --address or --out that cannot be used
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(2)
    except (LoadError, OSError) as e:
        console.print(f"[bold red]error:[/] {e}")
        raise typer.Exit(1)
    run = result.run
    table = Table(title=f"synclab load: {target} at {run['target']}, {users} users (run {run['id']}, "
                        f"started {run['started_at']})")
    for col in ("request", "ok", "failed", "req/s", "MB/s", "p50 ms", "p99 ms", "max ms"):
        table.add_column(col, justify="left" if col == "request" else "right")
    for r in result.rows:
        table.add_row(r["name"], str(r["requests"]), str(r["failures"]), f"{r['requests_per_s']:.1f}",
                      f"{r['mbytes_per_s']:.1f}", f"{r['p50_ms']:g}", f"{r['p99_ms']:g}", f"{r['max_ms']:.0f}")
    Console().print(table)
    if result.target_memory:
        m = result.target_memory
        console.print(f"target memory: {m['baseline_bytes'] / 2**20:.0f} MiB at start, peak "
                      f"{m['peak_bytes'] / 2**20:.0f} MiB (bound {m['bound_bytes'] / 2**20:.0f} MiB)")
    if result.check:
        console.print(f"store check: {result.check}")
    console.print(f"results in {out}/load.csv, load.json, load.png")
    if not result.ok:
        for p in result.problems:
            console.print(f"[bold red]problem:[/] {p}")
        raise typer.Exit(1)
