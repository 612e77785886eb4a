"""Two validations of the simulator side by side (``synclab validate compare``): simulated / emulated per point,
before and after a model change.

Reads ``sim-vs-emu.csv`` files of :mod:`synclab.validate.grid` (the same emulated points simulated twice, e.g.
without and with ``--sim-arg=--ring-goodput``), draws per strategy and rate the ratio against the number of
workers with the +-10 % band, and gives the table with both ratios (markdown, bold within +-10 %).
"""

from __future__ import annotations

from pathlib import Path

from synclab.fileio import InputFileError, read_csv_rows

COLUMNS = ("strategy", "rate", "model", "workers", "ratio")


def read(paths: list[Path]) -> dict[tuple, float]:
    """(strategy, rate, model, workers) -> simulated / emulated, from ``sim-vs-emu.csv`` files (a later file wins)."""
    out = {}
    for p in paths:
        for n, r in enumerate(read_csv_rows(p, "validation table", COLUMNS), 2):
            if r.get("ratio"):
                try:
                    out[(r["strategy"], r["rate"], r["model"], int(r["workers"]))] = float(r["ratio"])
                except (TypeError, ValueError) as e:
                    raise InputFileError(f"validation table {p} line {n}: {e}") from None
    return out


def table(before: dict, after: dict, labels: tuple[str, str]) -> list[str]:
    """Markdown rows of the points in both, each ratio bold within +-10 %."""
    keys = sorted(set(before) & set(after))

    def mark(v: float) -> str:
        return f"**{v:.3f}**" if abs(v - 1) <= 0.10 else f"{v:.3f}"

    lines = [f"| strategy | rate | model | workers | {labels[0]} | {labels[1]} |", "|---|---|---|---|---|---|"]
    lines += [f"| `{k[0]}` | {k[1]} | {k[2]} | {k[3]} | {mark(before[k])} | {mark(after[k])} |" for k in keys]
    return lines


def plot(before: dict, after: dict, labels: tuple[str, str], title: str, out: Path) -> None:
    """One panel per (strategy, rate, model): both ratios against the workers (log 2), the +-10 % band."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = sorted(set(before) & set(after))
    series = sorted({k[:3] for k in keys})
    cols = min(4, len(series))
    rows = -(-len(series) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.9 * rows), sharey=True, squeeze=False)
    for ax in axes.flat[len(series):]:
        ax.set_visible(False)
    for ax, s in zip(axes.flat, series):
        ws = sorted(k[3] for k in keys if k[:3] == s)
        ax.axhspan(0.9, 1.1, color="0.9")
        ax.plot(ws, [before[(*s, w)] for w in ws], "o--", color="0.5", label=labels[0])
        ax.plot(ws, [after[(*s, w)] for w in ws], "o-", color="C0", label=labels[1])
        ax.set_xscale("log", base=2)
        ax.set_xticks(ws, [str(w) for w in ws])
        ax.set_title(f"{s[0]}, {s[1]}, {s[2]}", fontsize=9)
        ax.set_xlabel("workers")
    for row in axes:
        row[0].set_ylabel("simulated ÷ emulated")
    fig.suptitle(title, fontsize=10)
    axes[0][0].legend(fontsize=8)
    fig.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, dpi=120)
    plt.close(fig)
