"""What a node's traffic sampler costs the host (issue 14: the emulator's own instrument beside the ring).

Every emulated node runs a :class:`~synclab.metrics.sampler.TrafficSampler` thread that wakes every
``run.traffic_sample_ms`` of *host* time (10 ms by default) to read its counters and buffer a row of
``traffic-<node>.csv``. For each interval this starts one sampler alone in a fresh process (a node's metrics on
``lo``, the counters a node in a namespace reads on its ``eth0``), lets it run ``--seconds`` and reports the
process's CPU seconds (user + system, every thread) per host second beyond an idle process's, and per sample:
the input :func:`synclab.sim.network.sampler_cores` takes (in cores, a share of one core's time per node).

    python benchmarks/sampler_cost.py [--intervals-ms 10,40,160,1000] [--seconds 10] [--repeats 3]
        [--out runs/sampler-cost]

Writes ``sampler-cost.csv`` and ``.json`` to ``--out``; run it alone (nothing else on the host), like every
measurement of the host's CPU.
"""

from __future__ import annotations

import argparse
import csv
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def _child(interval_ms: float, seconds: float) -> None:
    """One process: a sampler at ``interval_ms`` (0: none, the idle baseline) for ``seconds``; prints JSON."""
    from synclab.metrics.node import NodeMetrics
    from synclab.metrics.sampler import TrafficSampler

    with tempfile.TemporaryDirectory() as tmp:
        metrics = NodeMetrics("worker0", "worker", interfaces=["lo"])
        sampler = TrafficSampler(metrics, Path(tmp) / "traffic-worker0.csv", interval_s=interval_ms / 1000) \
            if interval_ms else None
        c0, t0 = _cpu_s(), time.monotonic()
        if sampler is not None:
            sampler.start()
        time.sleep(seconds)
        if sampler is not None:
            sampler.stop()
        cpu, wall = _cpu_s() - c0, time.monotonic() - t0
        print(json.dumps({"cpu_s": cpu, "wall_s": wall, "samples": sampler.samples if sampler else 0}))


def measure(interval_ms: float, seconds: float) -> dict:
    r = subprocess.run([sys.executable, __file__, "child", str(interval_ms), str(seconds)], capture_output=True,
                       text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "child":
        _child(float(sys.argv[2]), float(sys.argv[3]))
        return
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--intervals-ms", default="10,40,160,1000")
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", type=Path, default=Path("runs/sampler-cost"))
    a = ap.parse_args()
    intervals = [float(x) for x in a.intervals_ms.split(",") if x.strip()]
    if not intervals or min(intervals) <= 0 or a.seconds <= 0 or a.repeats < 1:
        sys.exit("sampler_cost: intervals, --seconds and --repeats must be positive")
    idle = statistics.median(measure(0, a.seconds)["cpu_s"] / a.seconds for _ in range(a.repeats))
    rows = []
    for ms in intervals:
        runs = [measure(ms, a.seconds) for _ in range(a.repeats)]
        share = statistics.median(r["cpu_s"] / r["wall_s"] for r in runs) - idle
        samples = statistics.median(r["samples"] / r["wall_s"] for r in runs)
        rows.append({"interval_ms": ms, "cores_per_node": max(0.0, share), "samples_per_s": samples,
                     "cpu_s_per_sample": max(0.0, share) / samples if samples else None,
                     "idle_cores": idle, "seconds": a.seconds, "repeats": a.repeats})
        print(f"{ms:g} ms: {share * 1000:.2f} ms CPU per host second ({samples:.1f} samples/s), idle {idle * 1000:.2f}")
    a.out.mkdir(parents=True, exist_ok=True)
    with (a.out / "sampler-cost.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (a.out / "sampler-cost.json").write_text(json.dumps({"rows": rows, "command": sys.argv,
                                                         "at": time.strftime("%Y-%m-%d %H:%M:%S UTC",
                                                                             time.gmtime())}, indent=1) + "\n")
    print(f"wrote {a.out}/sampler-cost.csv, .json")


if __name__ == "__main__":
    main()
