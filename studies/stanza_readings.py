"""How often Stanza's two readings of eq. 3/5 choose a different number of FC workers.

For every checked-in model profile with a CONV/FC boundary, every bandwidth and every cluster size N,
compare ``choose_fc_workers(N, profile)`` under ``algorithm`` (floor(log2 n_c)+2 rounds, n_f <= n_c) and
``as-printed`` (ceil(log2 n_c)+2 rounds, any n_f); print the count of cases that differ, of those with a
printed n_f > n_c (which cannot run), and write them to a CSV.

    python studies/stanza_readings.py [--nodes 2-32] [--bandwidths 1gbit,2.5gbit,10gbit,25gbit,100gbit]
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def main() -> None:
    from synclab.compute.profile import ModelProfileError
    from synclab.plans.stanza import choose_fc_workers
    from synclab.strategies.stanza import read_profile
    from synclab.units import parse_rate_bps

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", default="2-32", help="N range, inclusive (e.g. 2-32)")
    ap.add_argument("--bandwidths", default="1gbit,2.5gbit,10gbit,25gbit,100gbit")
    ap.add_argument("--out", type=Path, default=Path("runs/stanza-readings.csv"))
    a = ap.parse_args()
    lo, _, hi = a.nodes.partition("-")
    nodes = range(int(lo), int(hi or lo) + 1)
    if nodes.start < 2:
        ap.error("--nodes must start at 2 or more")
    rates = [parse_rate_bps(b) for b in a.bandwidths.split(",")]
    profiles = []
    for path in sorted((REPO / "profiles").glob("*.json")):
        try:
            profiles.append((path.name, read_profile(path)))
        except ModelProfileError:  # no CONV/FC boundary: not a Stanza model
            continue
    rows, cases = [], 0
    for name, bp in profiles:
        for rate in rates:
            p = bp.stanza(rate)
            for n in nodes:
                cases += 1
                alg, printed = choose_fc_workers(n, p), choose_fc_workers(n, p, reading="as-printed")
                if alg != printed:
                    rows.append({"profile": name, "bandwidth_bps": rate, "nodes": n, "fc_workers_algorithm": alg,
                                 "fc_workers_as_printed": printed, "printed_cannot_run": printed > n - printed})
    a.out.parent.mkdir(parents=True, exist_ok=True)
    with a.out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=["profile", "bandwidth_bps", "nodes", "fc_workers_algorithm",
                                          "fc_workers_as_printed", "printed_cannot_run"])
        w.writeheader()
        w.writerows(rows)
    unrunnable = sum(r["printed_cannot_run"] for r in rows)
    print(f"{len(profiles)} profiles x {len(rates)} bandwidths x N = {nodes.start}..{nodes.stop - 1}: {cases} cases; "
          f"the readings differ in {len(rows)} ({len(rows) / cases:.1%}), {unrunnable} of them with n_f > n_c "
          f"as printed; {a.out}")


if __name__ == "__main__":
    sys.exit(main())
