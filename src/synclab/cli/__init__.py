"""The ``synclab`` command: run experiments, start roles, report."""

from __future__ import annotations

import logging
import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer
import yaml
from rich.console import Console

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="SyncLab: run parameter-synchronization strategies on an emulated cluster.")
console = Console(stderr=True)

TokenOpt = typer.Option(..., "--token", envvar="SYNCLAB_TOKEN", show_envvar=True,
                        help="Shared job token (the launcher sets SYNCLAB_TOKEN).")


def _logging(verbose: bool) -> None:
    logging.basicConfig(level=logging.DEBUG if verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def _fail(message: str, code: int = 2) -> None:
    console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


@app.command()
def run(spec: Path = typer.Argument(..., help="Experiment spec (YAML)."),
        out: Optional[Path] = typer.Option(None, "--out", help="Run directory (default runs/<time>-<strategy>)."),
        set_: list[str] = typer.Option([], "--set", help="Override a spec key: dotted.key=value (repeatable)."),
        report: bool = typer.Option(True, help="Write plots and print the summary table at the end.")):
    """Launch a local cluster for SPEC and run it to completion; writes the run records into --out."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.config import SpecError
    from synclab.roles.job import resolve_job
    from synclab.roles.launcher import LocalCluster, supervise

    try:
        job = resolve_job(spec, set_)
    except SpecError as e:
        _fail(f"invalid spec: {e}")
    s, net = job.spec, job.network
    run_dir = out or Path("runs") / f"{time.strftime('%Y%m%d-%H%M%S')}-{s.strategy.name}"
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "spec.yaml").write_text(yaml.safe_dump(s.to_dict(), sort_keys=False))
    for stale in ("summary.json", "failure.json", "status.json"):
        (run_dir / stale).unlink(missing_ok=True)
    if net.isolation == "docker":
        from synclab.roles.docker_cluster import DockerCluster

        cluster = DockerCluster(s, run_dir)
    else:
        cluster = LocalCluster(s, run_dir, isolation=net.isolation)
    console.print(f"[bold]{s.name}[/]: strategy [cyan]{s.strategy.name}[/], model {s.model.name}, "
                  f"{s.n_workers} worker(s), {s.n_ps} PS shard(s), {net.describe()} -> {run_dir}")
    for note in job.notes:
        console.print(f"  note: {note}")
    try:
        cluster.start()
    except KeyboardInterrupt:
        cluster.terminate()
        _fail("interrupted while the cluster was starting; nothing is left running", 130)
    except Exception as e:  # e.g. a namespace, tc or Docker step failed: nothing is left behind
        cluster.terminate()
        _fail(f"could not start the cluster: {e}", 1)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console, transient=False) as progress:
        task = progress.add_task("iterations", total=s.run.iterations)
        status = supervise(cluster, on_progress=lambda done, total: progress.update(task, completed=done))
        if status["status"] == "ok":
            progress.update(task, completed=s.run.iterations)
    if status["status"] != "ok":
        _fail(f"run {status['status']}: {status['reason']} (records in {run_dir})",
              code=130 if status["status"] == "interrupted" else 1)
    if report:
        _report(run_dir)
    console.print(f"run records: {run_dir}")


def _report(run_dir: Path) -> None:
    from synclab.report import load_run, summary_table, write_report

    records = load_run(run_dir)
    Console().print(summary_table(records))
    for p in write_report(run_dir):
        console.print(f"plot: {p}")


@app.command("report")
def report_cmd(run_dir: Path = typer.Argument(..., help="A run directory written by `synclab run`.")):
    """Print the summary table of a run and write its plots (PNG) into the run directory."""
    try:
        _report(run_dir)
    except FileNotFoundError as e:
        _fail(str(e))


@app.command()
def coordinator(spec: Path = typer.Option(..., "--spec"), run_dir: Path = typer.Option(..., "--run-dir"),
                listen: str = typer.Option("0.0.0.0:50051", "--listen"), token: str = TokenOpt,
                metrics_port: int = typer.Option(0, "--metrics-port"),
                verbose: bool = typer.Option(False, "-v", "--verbose")):
    """Run the coordinator of one job (registers nodes, barriers, heartbeats, run records)."""
    from synclab.config import SpecError, load_spec
    from synclab.roles.coordinator import run_coordinator

    _logging(verbose)
    try:
        s = load_spec(spec)
    except SpecError as e:
        _fail(f"invalid spec: {e}")
    _exit_process(run_coordinator(s, run_dir, listen, token, metrics_port=metrics_port))


def _exit_process(code: int) -> None:
    """Leave a node process once its work is reported and its servers and channels are closed.

    Interpreter teardown can race gRPC core's own threads and abort ("terminate
    called without an active exception", exit -6 — seen once in a few hundred
    runs, after the job had succeeded); skip it.
    """
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _run_node(role: str, index: int, coordinator_addr: str, token: str, host: str, advertise: str, port: int,
              metrics_port: int, connect_timeout: float, verbose: bool) -> None:
    from synclab.roles.client import CoordinatorUnreachable

    _logging(verbose)
    if ":" not in coordinator_addr:
        _fail(f"--coordinator must be host:port, got {coordinator_addr!r}")
    if role == "ps":
        from synclab.roles.ps import run_ps as main_fn
    else:
        from synclab.roles.worker import run_worker as main_fn
    try:
        code = main_fn(index, coordinator_addr, token, host=host, advertise=advertise, port=port,
                       metrics_port=metrics_port, connect_timeout_s=connect_timeout)
    except CoordinatorUnreachable as e:
        _fail(str(e), 1)
    _exit_process(code)


CoordinatorOpt = typer.Option(..., "--coordinator", envvar="SYNCLAB_COORDINATOR", help="host:port of the coordinator.")
HostOpt = typer.Option("0.0.0.0", "--host", help="Address to bind the data-plane and metrics servers to.")
AdvertiseOpt = typer.Option("127.0.0.1", "--advertise", help="Address peers use to reach this node.")
PortOpt = typer.Option(0, "--port", help="Data-plane port (0: any free port).")
MetricsPortOpt = typer.Option(0, "--metrics-port", help="Prometheus metrics port (0: any free port).")
ConnectTimeoutOpt = typer.Option(30.0, "--connect-timeout", help="Seconds to reach the coordinator.")
VerboseOpt = typer.Option(False, "-v", "--verbose")


@app.command()
def ps(shard: int = typer.Option(-1, "--shard", help="Shard index (-1: assigned by the coordinator)."),
       coordinator_addr: str = CoordinatorOpt, token: str = TokenOpt, host: str = HostOpt,
       advertise: str = AdvertiseOpt, port: int = PortOpt, metrics_port: int = MetricsPortOpt,
       connect_timeout: float = ConnectTimeoutOpt, verbose: bool = VerboseOpt):
    """Run one parameter-server shard."""
    _run_node("ps", shard, coordinator_addr, token, host, advertise, port, metrics_port, connect_timeout, verbose)


@app.command()
def worker(rank: int = typer.Option(-1, "--rank", help="Worker rank (-1: assigned by the coordinator)."),
           coordinator_addr: str = CoordinatorOpt, token: str = TokenOpt, host: str = HostOpt,
           advertise: str = AdvertiseOpt, port: int = PortOpt, metrics_port: int = MetricsPortOpt,
           connect_timeout: float = ConnectTimeoutOpt, verbose: bool = VerboseOpt):
    """Run one training worker."""
    _run_node("worker", rank, coordinator_addr, token, host, advertise, port, metrics_port, connect_timeout, verbose)


@app.command()
def shape(profile: str = typer.Option(..., "--profile", help="Profile name or YAML file."),
          node: Optional[str] = typer.Option(None, "--node", help="Only this node (e.g. worker1)."),
          role: Optional[str] = typer.Option(None, "--role", help="Only this role (worker, ps)."),
          run_dir: Optional[Path] = typer.Option(None, "--run", help="Run directory of a local job (has control.json)."),
          coordinator_addr: Optional[str] = typer.Option(None, "--coordinator", envvar="SYNCLAB_COORDINATOR"),
          token: Optional[str] = typer.Option(None, "--token", envvar="SYNCLAB_TOKEN")):
    """Change the links of a running job (through its coordinator), e.g. `synclab shape --profile 4gbit`.

    Exits 0 once every targeted node applied the profile, 1 when one failed (or did not answer), 2 when the
    running backend cannot make the change (delay, jitter or loss without netem): then nothing was applied.
    """
    import json as _json

    from synclab.netem.profile import ProfileError, load_profile
    from synclab.wire import pb, rpc
    from synclab.wire.channels import open_channel

    if node and role:
        _fail("give --node or --role, not both")
    try:
        p = load_profile(profile)
    except ProfileError as e:
        _fail(str(e))
    if run_dir is not None:
        ctl = run_dir / "control.json"
        if not ctl.is_file():
            _fail(f"{ctl} is missing: is {run_dir} the directory of a running local job?")
        info = _json.loads(ctl.read_text())
        coordinator_addr, token = info["coordinator"], info["token"]
        if info.get("tls_dir"):  # a job that made its own CA (transport.tls)
            os.environ.setdefault("SYNCLAB_TLS_DIR", info["tls_dir"])
    if not coordinator_addr or not token:
        _fail("say which job: --run DIR, or --coordinator host:port with SYNCLAB_TOKEN set")
    import grpc

    stub = rpc.CoordinatorStub(open_channel(coordinator_addr, token, "cli"))
    try:
        reply = stub.Control(pb.ControlCommand(kind="shape", target=node or role or "",
                                               args_json=_json.dumps({"profile": p.model_dump(mode="json")})),
                             timeout=120)  # the coordinator answers once the nodes applied it (or gave up)
    except grpc.RpcError as e:
        _fail(f"could not reach the coordinator at {coordinator_addr}: {e.details()}", 1)
    if not reply.accepted:
        _fail(reply.message, 2 if reply.unsupported else 1)
    console.print(reply.message)


@app.command("compose-env")
def compose_env(env_file: Path = typer.Option(Path(".env"), "--env-file", help="File docker compose reads."),
                template: Path = typer.Option(Path(".env.example"), "--template", help="Non-secret settings."),
                force: bool = typer.Option(False, "--force", help="Replace existing secrets.")):
    """Write .env for `docker compose`: .env.example plus a random SYNCLAB_TOKEN and Grafana admin password."""
    from synclab.cli.compose_env import write_compose_env

    try:
        made = write_compose_env(env_file, template, force=force)
    except FileNotFoundError as e:
        _fail(str(e))
    console.print(f"{env_file}: generated {', '.join(made)}" if made else f"{env_file}: secrets already set")


@app.command()
def profiles(names: list[str] = typer.Argument(None, help="Profile names or YAML paths (default: all)."),
             profiles_dir: Optional[list[Path]] = typer.Option(None, "--profiles-dir",
                                                               help="Search these directories instead."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
             check: bool = typer.Option(False, "--check", help="Also show the backend this machine would use for "
                                        "each profile (probes the kernel: netem, tbf/htb, or app when unprivileged).")):
    """List the link profiles (netem/profiles) with their values; --check adds the backend this machine would use."""
    from synclab.netem.cli import profiles_command

    raise typer.Exit(profiles_command(names or [], dirs=profiles_dir, as_json=as_json, check=check))


@app.command()
def cleanup(force: bool = typer.Option(False, "--force", help="Also remove clusters whose owner still runs."),
            docker: bool = typer.Option(False, "--docker", help="Containers and networks of `synclab run` with "
                                        "network.isolation=docker instead (label io.synclab.job)."),
            job: Optional[str] = typer.Option(None, "--job", help="With --docker: only this job (`docker_job` in "
                                              "the run's control.json), whether its launcher runs or not.")):
    """Remove namespaces, veths, bridges, ifbs and rules left by a crashed run (--docker: its containers and
    network); what a launcher that still runs owns is kept unless --force."""
    if docker:
        from synclab.roles.docker_cluster import DockerUnavailable, clean, engine

        try:
            removed = clean(engine(), job, force=force)
        except DockerUnavailable as e:
            _fail(str(e))
        for what in removed:
            Console().print(f"removed {what}")
        Console().print(f"{len(removed)} leftover(s) removed" if removed else "nothing to clean up")
        return
    if job:
        _fail("--job goes with --docker")
    from synclab.netem.cli import cleanup_command

    from synclab.netem.netns import PREFIX_BASE

    raise typer.Exit(cleanup_command(PREFIX_BASE, force=force))


@app.command()
def netbench(profile: str = typer.Option(..., "--profile", help="Profile name or YAML file."),
             isolation: str = typer.Option("auto", "--isolation", help="netns | none | auto"),
             duration: float = typer.Option(3.0, "--duration", help="Seconds per transfer."),
             as_json: bool = typer.Option(False, "--json")):
    """Bulk transfer over one shaped link: SyncLab transport vs TCP vs iperf3, against the configured rate."""
    import json as _json

    from rich.table import Table

    from synclab.netem.netbench import run_netbench
    from synclab.netem.netns import netns_unavailable_reason
    from synclab.netem.profile import ProfileError, load_profile

    if isolation not in ("auto", "netns", "none"):
        _fail(f"--isolation must be netns, none or auto, got {isolation!r}")
    try:
        p = load_profile(profile)
    except ProfileError as e:
        _fail(str(e))
    reason = netns_unavailable_reason()
    if isolation == "netns" and reason:
        _fail(reason)
    iso = isolation if isolation != "auto" else ("none" if reason else "netns")
    with console.status(f"measuring {p.name} ({iso})..."):
        result = run_netbench(p, iso, duration_s=duration)
    if as_json:
        typer.echo(_json.dumps(result, indent=2, default=str))
        return
    t = Table(title=f"netbench {p.name}: backend {result['backend']}, isolation {iso}, "
                    f"RTT {result['rtt_s'] * 1e3:.2f} ms")
    for col in ("tool", "goodput", "÷ configured rate", "÷ iperf3"):
        t.add_column(col, justify="right")
    for tool in ("synclab", "tcp", "iperf3"):
        if tool in result:
            r = result[tool]
            t.add_row(tool, f"{r['goodput_bps'] / 1e9:.3f} Gbit/s", f"{r.get('ratio_to_rate', float('nan')):.3f}",
                      f"{r['ratio_to_iperf3']:.3f}" if "ratio_to_iperf3" in r else "")
    Console().print(t)
    for n in result.get("notes", []):
        console.print(f"note: {n}")


@app.command()
def profile(model: str = typer.Argument(..., help="Zoo model name."),
            batch: Optional[int] = typer.Option(None, "--batch", help="Batch size (default: the paper's)."),
            device: str = typer.Option("cpu", "--device", help="cpu or cuda."),
            out: Optional[Path] = typer.Option(None, "--out", help="Output JSON (default profiles/<model>-b<B>-<device>.json)."),
            iterations: int = typer.Option(10, "--iterations", min=1, help="Timed iterations (medians are kept)."),
            warmup: int = typer.Option(3, "--warmup", min=0, help="Untimed iterations first."),
            option: list[str] = typer.Option([], "--option", help="Model option key=value (repeatable)."),
            threads: Optional[int] = typer.Option(None, "--threads", help="torch intra-op threads (CPU).")):
    """Measure MODEL's per-tensor forward/backward times and write a model profile (JSON) for replay and planning."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from synclab.compute.profile import PAPER_BATCH, REPO_PROFILES, profile_file_name
    from synclab.compute.profiler import measure_profile
    from synclab.models import MODEL_NAMES

    if model not in MODEL_NAMES:
        _fail(f"unknown model {model!r}; known: {', '.join(MODEL_NAMES)}")
    if device not in ("cpu", "cuda"):
        _fail(f"--device must be cpu or cuda, got {device!r}")
    if batch is not None and batch < 1:
        _fail(f"--batch must be >= 1, got {batch}")
    options = {}
    for item in option:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            _fail(f"--option {item!r} must look like key=value")
        options[key] = yaml.safe_load(raw)
    batch = batch or PAPER_BATCH.get(model, 32)
    if threads:
        import torch

        torch.set_num_threads(threads)
    out = out or REPO_PROFILES / profile_file_name(model, batch, device)
    with Progress(TextColumn("[progress.description]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"profiling {model} (batch {batch}, {device})", total=warmup + iterations)
        try:
            prof = measure_profile(model, batch_size=batch, device=device, iterations=iterations, warmup=warmup,
                                   options=options, progress=lambda done, total: progress.update(task, completed=done))
        except (ValueError, TypeError) as e:
            _fail(str(e))
        except RuntimeError as e:
            _fail(str(e), 1)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(prof.to_json())
    sp = prof.spread
    console.print(f"{prof.label()}: forward {prof.forward_seconds * 1e3:.2f} ms, backward "
                  f"{prof.backward_seconds * 1e3:.2f} ms, update {prof.update_seconds * 1e3:.2f} ms, "
                  f"{len(prof.tensors)} tensors, {prof.params:,} params; "
                  f"spread across iterations (max-min)/median: forward "
                  f"{sp['forward_seconds']['relative_spread']:.1%}, backward {sp['backward_seconds']['relative_spread']:.1%}")
    console.print(f"profile: {out}")


@app.command()
def strategies():
    """List the registered strategies."""
    from synclab.strategies import registry

    for name in registry.names():
        cls = registry.get(name)
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        typer.echo(f"{name:12s} {doc}")


@app.command()
def version():
    """Print the SyncLab version."""
    from synclab import __version__

    typer.echo(__version__)


plan_app = typer.Typer(no_args_is_help=True, help="Plan strategies from a model profile, without a cluster.")
app.add_typer(plan_app, name="plan")


def _register_plan_commands() -> None:
    from synclab.cli.plan import mgwfbp as plan_mgwfbp
    from synclab.cli.plan_stanza import plan_stanza

    plan_app.command("mgwfbp")(plan_mgwfbp)
    plan_app.command("stanza")(plan_stanza)


_register_plan_commands()


def _register_simulate() -> None:
    from synclab.cli.simulate import simulate

    app.command("simulate")(simulate)


_register_simulate()


def _register_reproduce() -> None:
    from synclab.cli.reproduce import reproduce

    app.command("reproduce")(reproduce)


_register_reproduce()


tls_app = typer.Typer(no_args_is_help=True, help="Mutual TLS for a cluster's gRPC connections (multi-host runs).")
app.add_typer(tls_app, name="tls")


@tls_app.command("init")
def tls_init(directory: Path = typer.Argument(..., help="Where to write ca.pem, node.pem and node-key.pem."),
             days: int = typer.Option(30, "--days", min=1, help="How long the certificates are valid."),
             force: bool = typer.Option(False, "--force", help="Replace files already there.")):
    """Make a CA for one cluster and a node certificate signed by it; copy DIR to every host and start every
    SyncLab process with SYNCLAB_TLS_DIR=DIR (the CA's key is not kept: no one can add nodes later)."""
    from synclab.wire.tls import ENV, FILES, make_cluster_ca

    there = [n for n in FILES.values() if (directory / n).exists()]
    if there and not force:
        _fail(f"{directory} already holds {', '.join(there)}; --force replaces them (and every host needs the new ones)")
    make_cluster_ca(directory, days=days)
    console.print(f"wrote {', '.join(FILES.values())} to {directory} (valid {days} days); "
                  f"start every node with {ENV}={directory.resolve()}")


def _register_load() -> None:
    from synclab.cli.load import load

    app.command("load")(load)


_register_load()

dashboards_app = typer.Typer(no_args_is_help=True, help="The Grafana dashboards without Grafana: render them "
                                                         "from a live Prometheus.")
app.add_typer(dashboards_app, name="dashboards")


def _register_dashboards_commands() -> None:
    from synclab.cli.dashboards import render

    dashboards_app.command("render")(render)


_register_dashboards_commands()


def main() -> None:
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    app()
