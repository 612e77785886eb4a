"""The ring's goodput by (ranks, segment) as the simulator's input, from the ring measured alone (issue 14).

For every row of the ``allreduce.csv`` files of ``benchmarks/allreduce_vs_gloo.py`` (N ranks, M bytes, one
shaped link profile, SyncLab's measured seconds), this simulates the same ring all-reduce with the emulator's
host modelled (``synclab.sim.run.simulate_ring``: the per-message start-up and the CPU per byte on 2 shared
cores, the shaper's bucket) and finds the share of the link the ring must be given for the simulation to take
the measured time (``calibrate_ring_goodput``): what the model lacks, measured, not fitted to any validation
point. A ring the model already makes slower than measured keeps share 1. Writes ``ring-goodput.csv`` (ranks,
segment_bytes, share, …), which ``synclab simulate --host-cpu 2 --ring-goodput FILE`` reads.

    python experiments/ring_goodput.py runs/ring-s16/*/allreduce.csv [--cores 2] [--out ring-goodput.csv]
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
COLUMNS = ["ranks", "segment_bytes", "share", "mbytes", "emulated_s", "simulated_s", "simulated_full_share_s", "link",
           "source"]


def calibrate(paths: list[Path], cores: float) -> list[dict]:
    from synclab.netem.profile import load_profile
    from synclab.sim.run import calibrate_ring_goodput

    out = []
    for path in paths:
        for r in csv.DictReader(path.open()):
            n, mbytes, measured = int(r["ranks"]), float(r["mbytes"]), float(r["synclab_s"])
            link = r["link"] if Path(r["link"]).is_absolute() else str(REPO / r["link"])
            if not Path(link).exists():  # a profile name (netem/profiles/) rather than a file
                link = r["link"]
            profile = load_profile(link)
            numel = round(mbytes * 1e6 / 4)
            share, base, simulated = calibrate_ring_goodput(n, numel, profile, measured, host_cores=cores)
            out.append({"ranks": n, "segment_bytes": round(mbytes * 1e6 / n), "share": round(share, 4),
                        "mbytes": mbytes, "emulated_s": measured, "simulated_s": simulated,
                        "simulated_full_share_s": base, "link": r["link"], "source": str(path)})
    return sorted(out, key=lambda x: (x["ranks"], x["segment_bytes"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("csvs", nargs="+", type=Path, help="allreduce.csv files of benchmarks/allreduce_vs_gloo.py")
    ap.add_argument("--cores", type=float, default=2.0, help="the host's cores, as synclab simulate --host-cpu")
    ap.add_argument("--out", type=Path, default=Path("ring-goodput.csv"))
    a = ap.parse_args()
    for p in a.csvs:
        if not p.exists():
            raise SystemExit(f"error: {p}: no such file")
    rows = calibrate(a.csvs, a.cores)
    with a.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    from rich.console import Console
    from rich.table import Table

    t = Table(title="the ring alone: measured, simulated with the host model, the share that closes the gap")
    for c in ("ranks", "segment", "emulated s", "simulated s (share 1)", "share", "simulated s (share)"):
        t.add_column(c, justify="right")
    for r in rows:
        t.add_row(str(r["ranks"]), f"{r['segment_bytes'] / 1e3:.0f} kB", f"{r['emulated_s']:.3f}",
                  f"{r['simulated_full_share_s']:.3f}", f"{r['share']:.3f}", f"{r['simulated_s']:.3f}")
    Console(width=140).print(t)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
