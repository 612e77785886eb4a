"""shards.png from memory.csv: each shard's peak per run, by workers (python plot.py in this folder)."""

import csv
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
shards: dict[str, list[tuple[int, int]]] = defaultdict(list)  # malloc setting -> (workers, peak MiB) per shard
for row in csv.DictReader((HERE / "memory.csv").open()):
    if row["role"] == "ps":
        shards[row["malloc"]].append((int(row["workers"]), int(row["peak_mib"])))
fig, ax = plt.subplots(figsize=(7, 4.5))
for (malloc, points), marker, dx in zip(sorted(shards.items()), "os^", (-0.25, 0.0, 0.25)):
    ax.scatter([w + dx for w, _ in points], [m for _, m in points], marker=marker, label=malloc)
ax.set_xticks([4, 8, 16])
ax.set_xlabel("workers")
ax.set_ylabel("shard peak resident MiB (VmHWM)")
ax.set_title("VGG-16 replay, ps: each shard's peak by workers served and malloc setting")
ax.legend()
fig.tight_layout()
fig.savefig(HERE / "shards.png", dpi=110)
