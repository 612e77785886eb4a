"""Two validations of the simulator side by side: simulated ÷ emulated per point, before and after a model change.

Reads the ``sim-vs-emu.csv`` files of ``experiments/sim_vs_emu.py`` (the same emulated points simulated twice,
e.g. without and with ``--sim-arg=--ring-goodput``) and draws, per strategy and rate, the ratio against the
number of workers, with the ±10 % band; prints the table with both ratios.

    python experiments/sim_vs_emu_compare.py --before A.csv[,B.csv] --after C.csv[,D.csv] --out docs/img/x.png
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path


def read(paths: str) -> dict[tuple, float]:
    out = {}
    for p in paths.split(","):
        for r in csv.DictReader(Path(p).open()):
            if r.get("ratio"):
                out[(r["strategy"], r["rate"], r["model"], int(r["workers"]))] = float(r["ratio"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=True, help="sim-vs-emu.csv file(s), comma-separated")
    ap.add_argument("--after", required=True)
    ap.add_argument("--labels", default="before,after")
    ap.add_argument("--title", default="simulated ÷ emulated mean iteration")
    ap.add_argument("--out", type=Path, required=True)
    a = ap.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    before, after = read(a.before), read(a.after)
    keys = sorted(set(before) & set(after))
    if not keys:
        raise SystemExit("no point is in both --before and --after")
    lb, la = a.labels.split(",")
    print(f"| strategy | rate | model | workers | {lb} | {la} |\n|---|---|---|---|---|---|")
    for k in keys:
        mark = lambda v: f"**{v:.3f}**" if abs(v - 1) <= 0.10 else f"{v:.3f}"  # noqa: E731
        print(f"| `{k[0]}` | {k[1]} | {k[2]} | {k[3]} | {mark(before[k])} | {mark(after[k])} |")
    series = sorted({k[:3] for k in keys})
    cols = min(4, len(series))
    rows = -(-len(series) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.9 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, series):
        ws = sorted(k[3] for k in keys if k[:3] == s)
        ax.axhspan(0.9, 1.1, color="0.9")
        ax.plot(ws, [before[(*s, w)] for w in ws], "o--", color="0.5", label=lb)
        ax.plot(ws, [after[(*s, w)] for w in ws], "o-", color="C0", label=la)
        ax.set_xscale("log", base=2)
        ax.set_xticks(ws, [str(w) for w in ws])
        ax.set_title(f"{s[0]}, {s[1]}, {s[2]}", fontsize=9)
        ax.set_xlabel("workers")
    for row in axes:
        row[0].set_ylabel("simulated ÷ emulated")
    fig.suptitle(a.title, fontsize=10)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    a.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(a.out, dpi=120)
    print(f"wrote {a.out}")


if __name__ == "__main__":
    main()
