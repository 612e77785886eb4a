"""memory.png from summary.json: the largest worker and shard of each run (python plot.py in this folder)."""

import json
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = Path(__file__).resolve().parent
ORDER = ["old-ps-4w", "new-ps-4w", "fin-ps-4w", "fin2-ps-4w", "fin2-ps-16w", "old-p3-4w", "fin-p3-4w", "fin2-p3-4w"]
runs = {r["run"]: r for r in json.loads((HERE / "summary.json").read_text())}
names = [n for n in ORDER if n in runs]
x = range(len(names))
fig, ax = plt.subplots(figsize=(10, 4.5))
ax.bar([i - 0.2 for i in x], [runs[n]["largest_worker_mib"] for n in names], 0.4, label="largest worker")
ax.bar([i + 0.2 for i in x], [runs[n]["largest_shard_mib"] for n in names], 0.4, label="largest shard")
ax.set_xticks(list(x), [f"{n}\n{runs[n]['code']}" for n in names], fontsize=8)
ax.set_ylabel("peak resident MiB (VmHWM)")
ax.set_title("VGG-16 replay, PS strategies: peak memory per process before and after streaming")
ax.legend()
fig.tight_layout()
fig.savefig(HERE / "memory.png", dpi=110)
