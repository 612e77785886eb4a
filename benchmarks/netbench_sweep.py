"""Issue-3 targets, measured side by side in one run: goodput of SyncLab's transport on shaped links.

For each rate: kernel shaping in network namespaces (tbf and htb), SyncLab transport vs a plain TCP
stream vs iperf3 on the same link; and the in-process ``app`` backend on loopback up to 1 Gbit/s.
Prints a table of ratios (goodput / configured rate, SyncLab / iperf3) and writes JSON + a PNG.

    python benchmarks/netbench_sweep.py [--rates 100mbit,500mbit,1gbit,2gbit,4gbit] [--duration 3] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rates", default="100mbit,500mbit,1gbit,2gbit,4gbit")
    ap.add_argument("--app-rates", default="100mbit,500mbit,1gbit")
    ap.add_argument("--duration", type=float, default=3.0)
    ap.add_argument("--out", type=Path, default=Path("runs/netbench-sweep"))
    args = ap.parse_args()

    from rich.console import Console
    from rich.progress import track
    from rich.table import Table

    from synclab.linkprofile import profile_from_mapping
    from synclab.netem.netbench import run_netbench
    from synclab.netem.netns import netns_unavailable_reason

    args.out.mkdir(parents=True, exist_ok=True)
    cases = [(r, "none", None) for r in args.app_rates.split(",")]
    if netns_unavailable_reason() is None:
        cases += [(r, "netns", (b,)) for r in args.rates.split(",") for b in ("tbf", "htb")]
    results = []
    for rate, iso, prefer in track(cases, description="measuring links"):
        p = profile_from_mapping({"name": rate, "rate": rate, "direction": "egress"})
        r = run_netbench(p, iso, duration_s=args.duration, prefer=prefer)
        results.append(r)
    (args.out / "netbench.json").write_text(json.dumps(results, indent=2, default=str))
    t = Table(title="SyncLab transport goodput on shaped links (one run, side by side)")
    for c in ("rate", "isolation", "backend", "synclab Gbit/s", "÷ rate", "tcp ÷ rate", "iperf3 ÷ rate",
              "synclab ÷ iperf3", "RTT ms"):
        t.add_column(c, justify="right")
    f = lambda r, tool, key: f"{r[tool][key]:.3f}" if tool in r and key in r[tool] else ""  # noqa: E731
    for r in results:
        t.add_row(r["profile"], r["isolation"], r["backend"], f"{r['synclab']['goodput_bps'] / 1e9:.3f}",
                  f(r, "synclab", "ratio_to_rate"), f(r, "tcp", "ratio_to_rate"), f(r, "iperf3", "ratio_to_rate"),
                  f(r, "synclab", "ratio_to_iperf3"), f"{r['rtt_s'] * 1e3:.2f}")
    Console().print(t)


if __name__ == "__main__":
    main()
