"""Peak resident memory of every process of an emulated run: will a grid point fit this host?

Runs ``synclab run SPEC`` once per (strategy, workers) with the given overrides and, every ``--period``
seconds, reads each of its processes' peak resident set (``VmHWM`` of ``/proc/PID/status``, the kernel's
own high-water mark, so a peak between two samples is still seen, though not one in a process's last
``--period`` before it exits) and the host's ``MemAvailable``.
Writes ``memory.csv`` (one row per process: role, rank or shard, peak MiB) and ``memory.json`` (per
run: the largest worker and shard, the sum of all peaks, the host's lowest available memory while the
run's nodes were up, the run's exit status), and prints a table. The sum of peaks is an upper bound on
what the run needed at once: the processes do not all peak together.

    python benchmarks/replay_memory.py --strategies wfbp,ps --workers 2 \\
        --set model.name=vgg16 --set model.batch_size=64 --set compute.mode=replay --set compute.scale=0.01 \\
        --set run.iterations=4 --out runs/replay-memory [--lock /tmp/synclab-emu.lock]

Needs Linux (``/proc``) and psutil.
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
import threading
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
ROLES = ("coordinator", "worker", "ps")


def peak_rss_kib(pid: int) -> int | None:
    """``VmHWM`` of process ``pid`` in KiB (None once it has gone)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), None)
    except OSError:
        return None


def mem_available_kib() -> int:
    with open("/proc/meminfo") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("MemAvailable:"))


def role_of(cmdline: list[str]) -> tuple[str, int | None] | None:
    """(role, rank or shard) of a synclab node process from its command line (``... -m synclab ROLE
    --rank R|--shard S ...``, :func:`synclab.roles.launcher.node_args`); None for anything else."""
    if "synclab" not in cmdline[:-1]:
        return None
    i = cmdline.index("synclab")
    role = cmdline[i + 1]
    if role not in ROLES:
        return None
    index = None
    for flag in ("--rank", "--shard"):
        if flag in cmdline[:-1]:
            index = int(cmdline[cmdline.index(flag) + 1])
    return role, index


class Sampler:
    """Tracks the peak RSS of every synclab node below process ``root`` and the host's least available memory."""

    def __init__(self, root: int, period_s: float):
        self.root, self.period_s = root, period_s
        self.peaks: dict[int, tuple[str, int | None, int]] = {}  # pid -> (role, rank, VmHWM KiB)
        self.min_available_kib: int | None = None  # while the run's nodes are up
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="memory", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.period_s)

    def sample(self) -> None:
        """Read every node's peak; the host's available memory only while this run has nodes (not while
        ``flock`` waits for another job to finish)."""
        import psutil

        available = mem_available_kib()
        try:
            children = psutil.Process(self.root).children(recursive=True)
        except psutil.NoSuchProcess:
            return
        running = False
        for p in children:
            known = self.peaks.get(p.pid)
            if known is None:
                try:
                    found = role_of(p.cmdline())
                except (psutil.NoSuchProcess, psutil.AccessDenied):
                    continue
                if found is None:
                    continue
                known = (*found, 0)
            hwm = peak_rss_kib(p.pid)
            if hwm is not None:
                self.peaks[p.pid] = (known[0], known[1], max(known[2], hwm))
                running = True
        if running:
            self.min_available_kib = min(available, self.min_available_kib or available)


def measure(spec: Path, sets: list[str], out: Path, *, period_s: float = 1.0, lock: str | None = None) -> dict:
    """One run of ``spec`` with ``sets``: its processes' peaks (MiB) and the host's lowest available memory."""
    cmd = [sys.executable, "-m", "synclab", "run", str(spec), "--out", str(out / "run"), "--no-report"]
    for s in sets:
        cmd += ["--set", s]
    if lock:
        cmd = ["flock", lock, *cmd]
    out.mkdir(parents=True, exist_ok=True)
    with (out / "run.log").open("w") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, cwd=REPO)
        sampler = Sampler(proc.pid, period_s)
        sampler.start()
        rc = proc.wait()
        sampler.stop()
    rows = [{"role": role, "rank": rank, "peak_mib": round(kib / 1024)}
            for role, rank, kib in sorted(sampler.peaks.values(), key=lambda v: (v[0], v[1] or 0))]
    if not rows:
        raise RuntimeError(f"no synclab node process was seen (see {out / 'run.log'})")

    def largest(role: str) -> int | None:
        return max((r["peak_mib"] for r in rows if r["role"] == role), default=None)

    return {"rc": rc, "processes": rows, "largest_worker_mib": largest("worker"), "largest_shard_mib": largest("ps"),
            "sum_of_peaks_mib": sum(r["peak_mib"] for r in rows),
            "min_available_mib": None if sampler.min_available_kib is None else round(sampler.min_available_kib / 1024)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--spec", type=Path, default=REPO / "examples" / "quickstart.yaml")
    ap.add_argument("--strategies", default="wfbp")
    ap.add_argument("--workers", default="2")
    ap.add_argument("--set", dest="sets", action="append", default=[])
    ap.add_argument("--period", type=float, default=1.0, help="seconds between samples")
    ap.add_argument("--lock", help="flock this file around each run (a host shared by several jobs)")
    ap.add_argument("--out", type=Path, default=Path("runs/replay-memory"))
    a = ap.parse_args()
    if a.period <= 0:
        ap.error(f"--period must be > 0, got {a.period}")

    from rich.console import Console
    from rich.table import Table

    results, lines = [], []
    for strategy in a.strategies.split(","):
        for workers in [int(w) for w in a.workers.split(",")]:
            sets = [f"strategy.name={strategy}", f"cluster.workers={workers}", *a.sets]
            r = measure(a.spec, sets, a.out / f"{strategy}-{workers}w", period_s=a.period, lock=a.lock)
            results.append({"strategy": strategy, "workers": workers, "sets": sets, **r})
            lines += [{"strategy": strategy, "workers": workers, **p} for p in r["processes"]]
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "memory.json").write_text(json.dumps(results, indent=2) + "\n")
    with (a.out / "memory.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["strategy", "workers", "role", "rank", "peak_mib"])
        w.writeheader()
        w.writerows(lines)
    table = Table("strategy", "workers", "rc", "largest worker MiB", "largest shard MiB", "sum of peaks MiB",
                  "host's least available MiB", title=f"peak resident memory ({a.out})")
    for r in results:
        table.add_row(r["strategy"], str(r["workers"]), str(r["rc"]), str(r["largest_worker_mib"]),
                      str(r["largest_shard_mib"] or "-"), str(r["sum_of_peaks_mib"]),
                      str(r["min_available_mib"] or "-"))
    Console().print(table)
    if any(r["rc"] for r in results):
        sys.exit(1)


if __name__ == "__main__":
    main()
