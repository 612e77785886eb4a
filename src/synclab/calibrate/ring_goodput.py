"""The ring's goodput by (ranks, segment), the simulator's input, from the ring measured alone
(``synclab calibrate ring-goodput``; issue 14).

For every row of the ``allreduce.csv`` files of ``benchmarks/allreduce_vs_gloo.py`` (N ranks, M bytes, one shaped
link profile, SyncLab's measured seconds), this simulates the same ring all-reduce with the emulator's host
modelled (:func:`synclab.sim.run.simulate_ring`: the per-message start-up and the CPU per byte on shared cores,
the shaper's bucket) and finds the share of the link the ring must be given for the simulation to take the
measured time (:func:`synclab.sim.run.calibrate_ring_goodput`): what the model lacks, measured, not fitted to
any validation point. A ring the model already makes slower than measured keeps share 1.
"""

from __future__ import annotations

import csv
from pathlib import Path

from synclab.fileio import InputFileError, read_csv_rows

COLUMNS = ["ranks", "segment_bytes", "share", "mbytes", "emulated_s", "simulated_s", "simulated_full_share_s", "link",
           "source"]


def _link(text: str, root: Path | None) -> str:
    """A row's link as it can be loaded: a file (absolute, or from the checkout, or a record's old
    ``experiments/links/NAME`` now under ``benchmarks/links/``), else a profile name."""
    p = Path(text)
    candidates = [p] if p.is_absolute() else [Path.cwd() / p]
    if root is not None and not p.is_absolute():
        candidates += [root / p, root / "benchmarks" / "links" / p.name]
    return str(next((c for c in candidates if c.is_file()), text))


def calibrate(paths: list[Path], cores: float, root: Path | None = None) -> list[dict]:
    """One row per measured ring of the ``allreduce.csv`` files: the link share that makes the simulated ring
    (host modelled on ``cores`` shared cores) take the measured time (1 where the model is already slower)."""
    from synclab.netem.profile import load_profile
    from synclab.sim.run import calibrate_ring_goodput

    out = []
    for path in paths:
        rows = read_csv_rows(path, "all-reduce table", ("ranks", "mbytes", "synclab_s", "link"))
        if not rows:
            raise InputFileError(f"all-reduce table {path} has no measured ring")
        for line, r in enumerate(rows, 2):
            try:
                n, mbytes, measured = int(r["ranks"]), float(r["mbytes"]), float(r["synclab_s"])
            except (TypeError, ValueError) as e:
                raise InputFileError(f"all-reduce table {path} line {line}: {e}") from None
            profile = load_profile(_link(r["link"], root))
            numel = round(mbytes * 1e6 / 4)
            share, base, simulated = calibrate_ring_goodput(n, numel, profile, measured, host_cores=cores)
            out.append({"ranks": n, "segment_bytes": round(mbytes * 1e6 / n), "share": round(share, 4),
                        "mbytes": mbytes, "emulated_s": measured, "simulated_s": simulated,
                        "simulated_full_share_s": base, "link": r["link"], "source": str(path)})
    return sorted(out, key=lambda x: (x["ranks"], x["segment_bytes"]))


def write_csv(rows: list[dict], out: Path) -> None:
    """``ring-goodput.csv``: what ``synclab simulate --host-cpu 2 --ring-goodput FILE`` reads."""
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
