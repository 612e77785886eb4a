"""All-reduce: SyncLab's ring against torch.distributed's gloo on the same shaped links (issue 12, item 1).

N ranks live in N network namespaces on one bridge (``synclab.netem.netns``), every rank's ``eth0`` shaped by the
link profile with the kernel backend this machine has (tbf/htb, netem where the kernel has it); ``unshaped``
leaves the veths alone. For each link and N, back to back in the same namespaces:

1. gloo: ``torch.distributed.all_reduce`` of M fp32 values (the anchor);
2. SyncLab: ``synclab.collective.ring.ring_allreduce_`` of the same values over ``NodeTransport`` gRPC streams,
   as ``synceasgd`` runs its merged all-reduce (frames of ``transport.chunk_bytes: auto`` — 1 MiB on shaped links,
   4 MiB unshaped — the transport's defaults, store and forward per step unless ``--pieces``, chunks streamed into place; ``--staged-too`` also runs the staged receive path);
3. iperf3 between two ranks (once per link): the TCP ceiling and its CPU cost.

Each rank times every all-reduce after a barrier (gloo's, or a one-float ring all-reduce for SyncLab); an
all-reduce's time is the slowest rank's, and the table gives the median of ``--repeats`` after one warm-up. The
ring bound is ``2(N−1)/N · M · 4 B · 8 / rate`` (a rank sends that much through its link; unshaped has none).
CPU seconds per GB: the user+system time of all ranks over the ring's traffic, ``2(N−1) · M · 4`` bytes per
all-reduce (gloo's own algorithm may move a little more or less). Default M = 25,557,032: ResNet-50's gradients.

    python benchmarks/allreduce_vs_gloo.py [--links 1gbit,4gbit,unshaped] [--ranks 2,4,8]
        [--floats 25557032] [--repeats 3] [--notsent-lowat BYTES] [--ps] [--out runs/allreduce-vs-gloo]
    python benchmarks/allreduce_vs_gloo.py --quick    # 1gbit and unshaped, 4 ranks, 4 M floats, 2 repeats

Needs root (network namespaces). Writes ``allreduce.csv``, ``allreduce.json`` and ``allreduce.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

GLOO_PORT = 29500
SYNCLAB_PORT = 29600
TOKEN = "allreduce-bench"
RESNET50_FLOATS = 25_557_032


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this rank: gRPC's and gloo's included
    return r.ru_utime + r.ru_stime


def _report(rank: int, times: list[float], cpu_s: float, value: float, expected: float,
            threads: dict[str, float] | None = None) -> None:
    print(json.dumps({"rank": rank, "times": times, "cpu_s": cpu_s, "ok": abs(value - expected) <= 1e-6 * expected,
                      "threads": threads or {}}), flush=True)


def _rank_gloo(rank: int, addresses: list[str], floats: int, repeats: int, pieces: str = "1",
               staged: bool = False) -> None:
    import torch
    import torch.distributed as dist

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "eth0")
    world = len(addresses)
    dist.init_process_group("gloo", init_method=f"tcp://{addresses[0]}:{GLOO_PORT}", rank=rank, world_size=world,
                            timeout=timedelta(seconds=300))
    flat = torch.ones(floats)
    dist.all_reduce(flat)  # warm-up: connections and buffers
    times, cpu0 = [], _cpu_s()
    for _ in range(repeats):
        dist.barrier()
        t0 = time.perf_counter()
        dist.all_reduce(flat)
        times.append(time.perf_counter() - t0)
    cpu = _cpu_s() - cpu0
    _report(rank, times, cpu, float(flat[-1]), float(world) ** (repeats + 1))
    dist.destroy_process_group()


def _rank_synclab(rank: int, addresses: list[str], floats: int, repeats: int, pieces: str = "1",
                  staged: bool = False, chunk_bytes: int = 1 << 20, torch_threads: int = 0,
                  engine: str = "grpc") -> None:
    """``staged``: the transport reassembles every segment before the ring applies it (the receive path before
    chunks were streamed into place); else chunks are added or copied into the tensor as they arrive.
    ``engine``: what carries the ring's streams (``transport.engine``: grpc, or tcp on port SYNCLAB_PORT + 1)."""
    import torch

    from synclab.collective.ring import ring_allreduce_
    from synclab.transport.inbox import Inbox

    try:
        from synclab.metrics.threadcpu import cpu_between, thread_cpu
    except ImportError:  # a --baseline-src tree from before per-thread accounting
        def thread_cpu():
            return {}

        def cpu_between(before, after):
            return {}
    from synclab.transport.node import NodeTransport

    if torch_threads > 0:
        torch.set_num_threads(torch_threads)
    world = len(addresses)
    nxt, prev = (rank + 1) % world, (rank - 1) % world
    inbox = Inbox()
    node = NodeTransport(f"r{rank}", TOKEN, on_message=inbox.deliver, sinks=None if staged else inbox,
                         chunk_bytes=chunk_bytes, **({"engine": engine} if engine != "grpc" else {}))
    node.serve("0.0.0.0", SYNCLAB_PORT, peer=True, **({"tcp_port": SYNCLAB_PORT + 1} if engine != "grpc" else {}))
    port = SYNCLAB_PORT + 1 if engine == "tcp" else SYNCLAB_PORT
    link = node.connect(f"r{nxt}", f"{addresses[nxt]}:{port}", "peer")

    def allreduce(flat, key: str, iteration: int) -> None:
        ring_allreduce_(flat, rank=rank, world=world, key=key, iteration=iteration, to_next=link, inbox=inbox,
                        prev_name=f"r{prev}", pieces=None if pieces == "auto" else int(pieces))

    flat, token = torch.ones(floats), torch.zeros(1)
    allreduce(flat, "grad", 0)  # warm-up: streams open, buffers touched
    threads0 = thread_cpu()
    times, cpu0 = [], _cpu_s()
    for i in range(1, repeats + 1):
        allreduce(token, "barrier", i)
        t0 = time.perf_counter()
        allreduce(flat, "grad", i)
        times.append(time.perf_counter() - t0)
    cpu = _cpu_s() - cpu0
    threads = cpu_between(threads0, thread_cpu())
    allreduce(token, "barrier", repeats + 1)  # nobody closes while a neighbour still reads
    _report(rank, times, cpu, float(flat[-1]), float(world) ** (repeats + 1), threads)
    node.close(2.0)


def run_ranks(cluster, names: list[str], tool: str, floats: int, repeats: int, pieces: str = "1",
              staged: bool = False, rank_args: tuple[str, ...] = (), py_spy: Path | None = None,
              src: Path | None = None) -> dict:
    """Start one rank per namespace, wait for all; the slowest rank's time per all-reduce, CPU summed.

    ``py_spy``: a folder; every rank runs under ``py-spy record --native`` and writes its collapsed stacks
    there (``<tool>-rank<r>.txt``). ``src``: import ``synclab`` from this source tree instead (the code before a
    change, side by side with the current one)."""
    addresses = [cluster.address(n) for n in names]

    def spy(r: int) -> list[str]:
        if py_spy is None:
            return []
        py_spy.mkdir(parents=True, exist_ok=True)
        return [str(Path(sys.executable).with_name("py-spy")), "record", "--native", "--threads", "-r", "97",
                "-f", "raw", "-o", str(py_spy / f"{tool}{'-staged' if staged else ''}-rank{r}.txt"), "--"]

    env = None if src is None else {**os.environ, "PYTHONPATH": str(src)}
    procs = [subprocess.Popen([*cluster.exec_prefix(n), *spy(r), sys.executable, __file__, "rank", "--tool", tool,
                               "--rank", str(r), "--addresses", ",".join(addresses), "--floats", str(floats),
                               "--repeats", str(repeats), "--pieces", pieces, *(["--staged"] if staged else []),
                               *rank_args],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for r, n in enumerate(names)]
    reports = []
    try:
        for r, p in enumerate(procs):
            out, err = p.communicate(timeout=900)
            if p.returncode != 0 or not out.strip():
                raise RuntimeError(f"{tool} rank {r} failed (exit {p.returncode}): {err.strip()[-1500:]}")
            reports.append(json.loads(out.strip().splitlines()[-1]))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if not all(rep["ok"] for rep in reports):
        raise RuntimeError(f"{tool}: a rank ended with a wrong sum")
    per_allreduce = [max(rep["times"][i] for rep in reports) for i in range(repeats)]
    from synclab.metrics.threadcpu import cpu_by_role

    threads: dict[str, float] = {}
    for rep in reports:
        for role, sec in cpu_by_role(rep.get("threads", {})).items():
            threads[role] = threads.get(role, 0.0) + sec
    return {"seconds": statistics.median(per_allreduce), "all_seconds": per_allreduce,
            "cpu_s": sum(rep["cpu_s"] for rep in reports), "threads_cpu_s": threads}


def measure(link: str, n: int, floats: int, repeats: int, notsent_lowat: int | None = None,
            store_and_forward: bool = False, pieces: str = "1", staged_too: bool = False,
            rank_args: tuple[str, ...] = (), py_spy: Path | None = None, skip_gloo: bool = False,
            baseline_src: Path | None = None, tcp_too: bool = False) -> dict:
    """One point: a fresh cluster of ``n`` namespaces shaped by ``link``; gloo, SyncLab, then iperf3 in it."""
    from synclab.netem import bench
    from synclab.netem.netns import NetnsCluster, Topology
    from synclab.netem.profile import load_profile

    profile = None if link == "unshaped" else load_profile(link)
    names = [f"r{i}" for i in range(n)]
    iperf = None
    with NetnsCluster(Topology.star(names, profile=profile), notsent_lowat=notsent_lowat) as c:
        applied = c.applied.get("r0")
        backend = applied.backend if applied else "none"
        if applied and applied.left_to_app:
            raise RuntimeError(f"{link}: the kernel could not shape {sorted(applied.left_to_app)}; "
                               "gloo would run unshaped, so the comparison would not be fair")
        gloo = (run_ranks(c, names, "gloo", floats, repeats) if not skip_gloo
                else {"seconds": float("nan"), "all_seconds": [], "cpu_s": float("nan")})
        staged = (run_ranks(c, names, "synclab", floats, repeats, pieces, staged=True, rank_args=rank_args)
                  if staged_too else None)
        base = (run_ranks(c, names, "synclab", floats, repeats, pieces, src=baseline_src)
                if baseline_src is not None else None)
        ours = run_ranks(c, names, "synclab", floats, repeats, pieces, rank_args=rank_args, py_spy=py_spy)
        tcp = (run_ranks(c, names, "synclab", floats, repeats, pieces, rank_args=(*rank_args, "--engine", "tcp"))
               if tcp_too else None)
        sf = (run_ranks(c, names, "synclab", floats, repeats, pieces="1", rank_args=rank_args)
              if store_and_forward else None)
        if bench.iperf3_available():
            iperf = bench.iperf3_goodput(c.exec_prefix("r1"), c.exec_prefix("r0"), c.address("r1"), duration_s=3.0)
    from synclab.collective.ring import ring_pieces

    ring_gb = 2 * (n - 1) * floats * 4 / 1e9  # every rank's sends, one all-reduce
    rate = profile.rate_bps if profile else None
    return {
        "link": link, "backend": backend, "ranks": n, "mbytes": floats * 4 / 1e6,
        "ring_bound_s": 2 * (n - 1) / n * floats * 4 * 8 / rate if rate else None,
        "gloo_s": gloo["seconds"], "synclab_s": ours["seconds"], "speed_vs_gloo": gloo["seconds"] / ours["seconds"],
        "gloo_cpu_s_per_gb": gloo["cpu_s"] / (ring_gb * repeats),
        "synclab_cpu_s_per_gb": ours["cpu_s"] / (ring_gb * repeats),
        "iperf3_gbps": iperf.goodput_bps / 1e9 if iperf else None,
        "iperf3_cpu_s_per_gb": (iperf.cpu_seconds / (iperf.bytes / 1e9)
                                if iperf and iperf.cpu_seconds is not None else None),
        "gloo_all_s": gloo["all_seconds"], "synclab_all_s": ours["all_seconds"],
        "pieces": ring_pieces(floats, n) if pieces == "auto" else int(pieces),
        "chunk_bytes": int(rank_args[rank_args.index("--chunk-bytes") + 1]) if "--chunk-bytes" in rank_args else None,
        "staged_s": staged["seconds"] if staged else None,
        "staged_speed_vs_gloo": gloo["seconds"] / staged["seconds"] if staged else None,
        "staged_cpu_s_per_gb": staged["cpu_s"] / (ring_gb * repeats) if staged else None,
        "baseline_s": base["seconds"] if base else None,
        "baseline_speed_vs_gloo": gloo["seconds"] / base["seconds"] if base else None,
        "baseline_cpu_s_per_gb": base["cpu_s"] / (ring_gb * repeats) if base else None,
        "baseline_threads_cpu_s_per_gb": ({k: v / (ring_gb * repeats) for k, v in base["threads_cpu_s"].items()}
                                          if base else None),
        "synclab_threads_cpu_s_per_gb": {k: v / (ring_gb * repeats) for k, v in ours["threads_cpu_s"].items()},
        "synclab_store_forward_s": sf["seconds"] if sf else None,
        "pipeline_speedup": sf["seconds"] / ours["seconds"] if sf else None,
        "tcp_s": tcp["seconds"] if tcp else None,
        "tcp_speed_vs_gloo": gloo["seconds"] / tcp["seconds"] if tcp else None,
        "tcp_cpu_s_per_gb": tcp["cpu_s"] / (ring_gb * repeats) if tcp else None,
        "tcp_all_s": tcp["all_seconds"] if tcp else None,
        "tcp_threads_cpu_s_per_gb": ({k: v / (ring_gb * repeats) for k, v in tcp["threads_cpu_s"].items()}
                                     if tcp else None),
    }


def chunk_for(link: str, chunk: str) -> int:
    """The frame payload SyncLab's ranks use on ``link``: ``chunk`` in bytes, or ``auto`` (the spec's rule)."""
    if chunk != "auto":
        return int(chunk)
    from synclab.netem.profile import load_profile
    from synclab.wire.frames import auto_chunk_bytes

    return auto_chunk_bytes(None if link == "unshaped" else load_profile(link).rate_bps)


def measure_ps(link: str, out: Path, workers: int = 4, shards: int = 2, iterations: int = 8) -> dict:
    """The PS path: ResNet-50's gradients pushed and its parameters pulled through ``ps`` (replayed compute at
    ×0.001, so the iteration is the push and pull), against the TCP ceiling of the busiest link.

    Each shard receives ``workers / shards`` of every worker's push and sends as much back, so its egress carries
    ``workers · M / shards`` bytes per iteration; the ceiling is that over the TCP goodput of the link (the
    ring bound's counterpart: iperf3's ÷ rate at the kernel's framing, 0.957 at 1500-byte frames). Unshaped
    links have no ceiling here.
    """
    from synclab.netem.profile import load_profile

    run_dir = out / f"ps-{link}"
    cmd = [sys.executable, "-m", "synclab", "run", str(Path(__file__).resolve().parents[1] / "examples" /
           "quickstart.yaml"), "--out", str(run_dir), "--no-report"]
    for s in ("strategy.name=ps", "model.name=resnet50", "compute.mode=replay", "compute.scale=0.001",
              f"cluster.workers={workers}", f"cluster.ps_shards={shards}", f"run.iterations={iterations}",
              "run.warmup=2", "network.isolation=netns", "run.dilation=1",  # the host's own PS path, undilated
              *(("network.rate=null", "network.delay=null") if link == "unshaped" else (f"network.rate={link}",))):
        cmd += ["--set", s]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=1800)
    if r.returncode:
        raise RuntimeError(f"ps over {link} failed: {(r.stdout + r.stderr).strip()[-800:]}")
    summary = json.loads((run_dir / "summary.json").read_text())
    rate = None if link == "unshaped" else load_profile(link).rate_bps
    shard_bytes = workers * RESNET50_FLOATS * 4 / shards
    ceiling = shard_bytes * 8 / (rate * 0.957) if rate else None
    it = summary["iteration_seconds"]["mean"]
    return {"link": link, "workers": workers, "shards": shards, "iteration_s": it, "tcp_ceiling_s": ceiling,
            "ceiling_over_iteration": ceiling / it if ceiling else None, "backend": summary.get("network_backend")}


def plot(rows: list[dict], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [f"{r['link']}\n{r['ranks']} ranks" for r in rows]
    x = range(len(rows))
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(max(8, 1.6 * len(rows) + 4), 4.2))
    w = 0.38
    ax1.bar([i - w / 2 for i in x], [r["gloo_s"] for r in rows], w, label="gloo")
    ax1.bar([i + w / 2 for i in x], [r["synclab_s"] for r in rows], w, label="SyncLab ring")
    for i, r in enumerate(rows):
        if r["ring_bound_s"]:
            ax1.hlines(r["ring_bound_s"], i - w, i + w, colors="k", linestyles="dotted",
                       label="ring bound" if i == 0 else None)
    ax1.set_xticks(list(x), labels, fontsize=8)
    ax1.set_ylabel("seconds per all-reduce")
    ax1.legend(fontsize=8)
    ax2.bar(list(x), [r["speed_vs_gloo"] for r in rows], 0.6, color="tab:green")
    ax2.axhline(1.0, color="k", lw=0.8)
    ax2.set_xticks(list(x), labels, fontsize=8)
    ax2.set_ylabel("SyncLab speed ÷ gloo speed")
    fig.suptitle(f"all-reduce of {rows[0]['mbytes']:.0f} MB fp32, one namespace per rank")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)



def _before_now_table(title: str, rows: list[dict], key: str, names: tuple[str, str]):
    """One table of an older ring (``{key}_s``, ``{key}_speed_vs_gloo``, ``{key}_cpu_s_per_gb``) beside today's."""
    from rich.table import Table

    old, new = names
    t = Table(title=title)
    for col in ("link", "ranks", f"{old} s", f"{new} s", f"÷ gloo {old}", f"÷ gloo {new}", f"CPU s/GB {old}",
                f"CPU s/GB {new}"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(r["link"], str(r["ranks"]), f"{r[key + '_s']:.3f}", f"{r['synclab_s']:.3f}",
                  f"{r[key + '_speed_vs_gloo']:.2f}", f"{r['speed_vs_gloo']:.2f}",
                  f"{r[key + '_cpu_s_per_gb']:.2f}", f"{r['synclab_cpu_s_per_gb']:.2f}")
    return t

def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "rank":
        ap = argparse.ArgumentParser(prog="allreduce_vs_gloo.py rank")
        ap.add_argument("rank_cmd")
        ap.add_argument("--tool", choices=("gloo", "synclab"), required=True)
        ap.add_argument("--rank", type=int, required=True)
        ap.add_argument("--addresses", required=True)
        ap.add_argument("--floats", type=int, required=True)
        ap.add_argument("--repeats", type=int, required=True)
        ap.add_argument("--pieces", default="1")
        ap.add_argument("--staged", action="store_true")
        ap.add_argument("--chunk-bytes", type=int, default=1 << 20)
        ap.add_argument("--torch-threads", type=int, default=0)
        ap.add_argument("--engine", choices=("grpc", "tcp"), default="grpc")
        a = ap.parse_args()
        if a.tool == "gloo":
            _rank_gloo(a.rank, a.addresses.split(","), a.floats, a.repeats)
        else:
            _rank_synclab(a.rank, a.addresses.split(","), a.floats, a.repeats, a.pieces, a.staged, a.chunk_bytes,
                          a.torch_threads, a.engine)
        # The report is printed and the streams are closed: leave without interpreter teardown, where gRPC
        # core's threads can still be joinable as their objects are destroyed and abort the process
        # ("terminate called without an active exception", exit -6 after a correct report; seen in CI).
        sys.stdout.flush()
        os._exit(0)

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--links", default="1gbit,4gbit,unshaped")
    ap.add_argument("--ranks", default="2,4,8")
    ap.add_argument("--floats", type=int, default=RESNET50_FLOATS)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="1gbit and unshaped, 4 ranks, 4 M floats, 2 repeats")
    ap.add_argument("--ps", action="store_true",
                    help="also the PS path: push + pull of ResNet-50 through `ps`, 4 workers and 2 shards, per link")
    ap.add_argument("--ps-links", default=None, help="links of the PS path (default: --links)")
    ap.add_argument("--notsent-lowat", type=int, default=None,
                    help="net.ipv4.tcp_notsent_lowat in every namespace (default: the kernel's)")
    ap.add_argument("--store-and-forward", action="store_true",
                    help="also run SyncLab's ring unpipelined (pieces=1), side by side: what pipelining buys "
                         "(with --pieces auto)")
    ap.add_argument("--pieces", default="1",
                    help="parts the ring pipelines (1: store and forward, what the strategies use; auto: ring_pieces)")
    ap.add_argument("--staged-too", action="store_true",
                    help="also run SyncLab's ring with every segment reassembled before it is applied (the receive "
                         "path before chunks went straight into place), side by side, just before the streamed one")
    ap.add_argument("--chunk-bytes", default="auto",
                    help="SyncLab's frame payload in bytes (transport.chunk_bytes); auto: the spec's rule for the link "
                         "(synclab.wire.frames.auto_chunk_bytes: 4 MiB unshaped, else 1 MiB up to 10 Gbit/s)")
    ap.add_argument("--torch-threads", type=int, default=0,
                    help="torch intra-op threads in SyncLab's ranks (0: torch's default)")
    ap.add_argument("--py-spy", type=Path, default=None,
                    help="profile SyncLab's ranks with py-spy (--native --threads), collapsed stacks into this folder")
    ap.add_argument("--baseline-src", type=Path, default=None,
                    help="also run SyncLab's ring with `synclab` imported from this source tree (e.g. a checkout "
                         "of the code before a change; its defaults, not --chunk-bytes), just before the current one")
    ap.add_argument("--tcp-too", action="store_true",
                    help="also run SyncLab's ring on the tcp data-plane engine (transport.engine: tcp), same links, "
                         "same run")
    ap.add_argument("--skip-gloo", action="store_true", help="SyncLab only (profiling; no ratio)")
    ap.add_argument("--out", type=Path, default=Path("runs/allreduce-vs-gloo"))
    a = ap.parse_args()
    if a.quick:
        a.links, a.ranks, a.floats, a.repeats = "1gbit,unshaped", "4", 4 << 20, 2
    links = a.links.split(",")
    ranks = [int(n) for n in a.ranks.split(",")]
    if any(n < 2 for n in ranks) or a.floats < 1 or a.repeats < 1:
        ap.error("--ranks must be >= 2 each, --floats and --repeats >= 1")
    from synclab.netem.netns import netns_unavailable_reason

    reason = netns_unavailable_reason()
    if reason:
        print(f"allreduce_vs_gloo: needs network namespaces: {reason}", file=sys.stderr)
        sys.exit(2)

    from rich.console import Console
    from rich.progress import Progress
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 170)
    if a.py_spy is not None and not Path(sys.executable).with_name("py-spy").exists():
        sys.exit(f"--py-spy needs py-spy beside {sys.executable} (pip install py-spy)")
    rows = []
    with Progress(console=console) as bar:
        task = bar.add_task("all-reduce", total=len(links) * len(ranks))
        for link in links:
            for n in ranks:
                bar.update(task, description=f"{link}, {n} ranks")
                rows.append(measure(link, n, a.floats, a.repeats, a.notsent_lowat, a.store_and_forward, a.pieces,
                                    a.staged_too, ("--chunk-bytes", str(chunk_for(link, a.chunk_bytes)),
                                                   "--torch-threads", str(a.torch_threads)),
                                    a.py_spy, a.skip_gloo, a.baseline_src, a.tcp_too))
                bar.advance(task)

    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "allreduce.json").write_text(json.dumps(rows, indent=2))  # before the PS path, which may fail
    ps_links = a.ps_links.split(",") if a.ps_links else links
    ps_rows = [measure_ps(link, a.out) for link in ps_links] if a.ps else []
    if ps_rows:
        (a.out / "ps.json").write_text(json.dumps(ps_rows, indent=2))
    import csv

    with (a.out / "allreduce.csv").open("w", newline="") as f:
        cols = [k for k in rows[0] if not k.endswith("_all_s")]
        wr = csv.DictWriter(f, fieldnames=cols, extrasaction="ignore")
        wr.writeheader()
        wr.writerows(rows)
    plot(rows, a.out / "allreduce.png")

    def num(v, fmt):
        return "—" if v is None else format(v, fmt)

    t = Table(title=f"all-reduce of {a.floats:,} fp32 ({a.floats * 4 / 1e6:.0f} MB), median of {a.repeats}")
    for col in ("link", "backend", "ranks", "ring bound s", "gloo s", "SyncLab s", "SyncLab ÷ gloo (speed)",
                "CPU s/GB gloo", "CPU s/GB SyncLab", "iperf3 Gbit/s", "CPU s/GB iperf3"):
        t.add_column(col, justify="right")
    for r in rows:
        t.add_row(r["link"], r["backend"], str(r["ranks"]), num(r["ring_bound_s"], ".3f"), f"{r['gloo_s']:.3f}",
                  f"{r['synclab_s']:.3f}", f"{r['speed_vs_gloo']:.2f}", f"{r['gloo_cpu_s_per_gb']:.2f}",
                  f"{r['synclab_cpu_s_per_gb']:.2f}", num(r["iperf3_gbps"], ".2f"), num(r["iperf3_cpu_s_per_gb"], ".2f"))
    console.print(t)
    if a.store_and_forward:
        t = Table(title="SyncLab's ring pipelined vs store and forward (same links, same run)")
        for col in ("link", "ranks", "pieces", "pipelined s", "store-and-forward s", "speedup"):
            t.add_column(col, justify="right")
        for r in rows:
            t.add_row(r["link"], str(r["ranks"]), str(r["pieces"]), f"{r['synclab_s']:.3f}",
                      f"{r['synclab_store_forward_s']:.3f}", f"{r['pipeline_speedup']:.2f}")
        console.print(t)
    if a.staged_too:
        console.print(_before_now_table("SyncLab's ring: chunks into place vs staged reassembly (same links, same "
                                        "run)", rows, "staged", ("staged", "streamed")))
    if a.baseline_src:
        console.print(_before_now_table(f"SyncLab's ring: before ({a.baseline_src}) vs now (same links, same run)",
                                        rows, "baseline", ("before", "now")))
    if a.tcp_too:
        t = Table(title="SyncLab's ring: grpc vs tcp data-plane engine (same links, same run)")
        for col in ("link", "ranks", "gloo s", "grpc s", "tcp s", "grpc ÷ gloo (speed)", "tcp ÷ gloo (speed)",
                    "CPU s/GB gloo", "CPU s/GB grpc", "CPU s/GB tcp"):
            t.add_column(col, justify="right")
        for r in rows:
            t.add_row(r["link"], str(r["ranks"]), f"{r['gloo_s']:.3f}", f"{r['synclab_s']:.3f}", f"{r['tcp_s']:.3f}",
                      f"{r['speed_vs_gloo']:.2f}", f"{r['tcp_speed_vs_gloo']:.2f}", f"{r['gloo_cpu_s_per_gb']:.2f}",
                      f"{r['synclab_cpu_s_per_gb']:.2f}", f"{r['tcp_cpu_s_per_gb']:.2f}")
        console.print(t)
    if ps_rows:
        t = Table(title="PS path: ResNet-50 push + pull through `ps`, 4 workers, 2 shards (mean iteration)")
        for col in ("link", "backend", "iteration s", "TCP ceiling s", "ceiling ÷ iteration"):
            t.add_column(col, justify="right")
        for r in ps_rows:
            t.add_row(r["link"], str(r["backend"]), f"{r['iteration_s']:.3f}", num(r["tcp_ceiling_s"], ".3f"),
                      num(r["ceiling_over_iteration"], ".2f"))
        console.print(t)
    console.print(f"wrote {a.out}/allreduce.csv, .json, .png" + (", ps.json" if ps_rows else ""))


if __name__ == "__main__":
    main()
