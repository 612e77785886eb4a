"""Algorithm 1 against the exact optimum of eq. 24 on the model zoo's profiles (MG-WFBP §4.2, Theorem 1).

For every checked-in profile (``profiles/*.json``) and each of the three clusters
of MG-WFBP Fig. 4 (all-reduce cost T(M) = a + b·M, M in bytes, float32
tensors), computes the merge plan of Algorithm 1 as printed and the exact
minimum over all contiguous plans (:func:`synclab.plans.mgwfbp.optimal_plan`),
and their iteration times from eq. 8/24 next to WFBP (eq. 8) and SyncEASGD
(eq. 9). Prints a table and writes ``mgwfbp-zoo.csv``/``.json`` and a PNG.

``--scales`` multiplies the profiles' compute times (t_f, t_b) as ``compute.scale``
does: a profile measured on a CPU is ~100x slower than the GPUs of Fig. 4, so
with CPU profiles the interesting rows are at 0.01 (and below), where
communication is no longer hidden and merging matters.

    python studies/mgwfbp_zoo.py [--profiles profiles/*.json] [--scales 1,0.01,0.001] [--out runs/mgwfbp-zoo]
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

# MG-WFBP Fig. 4: fitted a (s) and b (s/byte) of the three test-bed clusters
CLUSTERS = {
    "K80 10GbE (cluster 1)": (9.72e-4, 1.97e-9),
    "V100 10GbE (cluster 2)": (9.08e-4, 7.4e-10),
    "V100 56GbIB (cluster 3)": (2.36e-4, 4.06e-10),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--profiles", nargs="*", type=Path)
    ap.add_argument("--scales", default="1,0.01,0.001")
    ap.add_argument("--out", type=Path, default=Path("runs/mgwfbp-zoo"))
    args = ap.parse_args()

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from rich.console import Console
    from rich.table import Table

    from synclab.compute.profile import available_profiles, load_model_profile
    from synclab.plans.mgwfbp import CostModel, algorithm1, iteration_time, optimal_plan, synceasgd_plan, wfbp_plan

    paths = args.profiles or [e[3] for e in available_profiles()]
    rows = []
    for path in paths:
        p = load_model_profile(path)
        sizes = [4 * t.params for t in p.tensors]
        for scale, (cluster, (a, b)) in ((float(x), c) for x in args.scales.split(",") for c in CLUSTERS.items()):
            t_f, t_b = p.forward_seconds * scale, [t.backward_seconds * scale for t in p.tensors]
            cost = CostModel(a, b)
            plans = {"wfbp": wfbp_plan(len(t_b)), "synceasgd": synceasgd_plan(len(t_b)),
                     "algorithm1": algorithm1(t_f, t_b, sizes, cost), "optimal": optimal_plan(t_f, t_b, sizes, cost)}
            t = {k: iteration_time(v, t_f, t_b, sizes, cost) for k, v in plans.items()}
            rows.append({"model": p.model, "batch": p.batch_size, "device": p.meta.get("device_name") or p.device,
                         "scale": scale, "tensors": len(t_b), "cluster": cluster, "a": a, "b": b,
                         **{f"{k}_seconds": v for k, v in t.items()},
                         "algorithm1_groups": len(plans["algorithm1"].groups),
                         "optimal_groups": len(plans["optimal"].groups),
                         "same_plan": plans["algorithm1"] == plans["optimal"],
                         "algorithm1_over_optimal": t["algorithm1"] / t["optimal"]})
    args.out.mkdir(parents=True, exist_ok=True)
    with (args.out / "mgwfbp-zoo.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    (args.out / "mgwfbp-zoo.json").write_text(json.dumps(rows, indent=1))
    table = Table(title="MG-WFBP: Algorithm 1 vs the exact optimum of eq. 24 (predicted iteration time)")
    for c in ("model", "profile", "scale", "cluster", "WFBP s", "SyncEASGD s", "Alg. 1 s", "optimum s", "Alg.1 ÷ opt",
              "groups (Alg.1/opt)"):
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(r["model"], f"b{r['batch']} {r['device'][:18]}", f"{r['scale']:g}", r["cluster"], f"{r['wfbp_seconds']:.4f}",
                      f"{r['synceasgd_seconds']:.4f}", f"{r['algorithm1_seconds']:.4f}", f"{r['optimal_seconds']:.4f}",
                      f"{r['algorithm1_over_optimal']:.4f}", f"{r['algorithm1_groups']}/{r['optimal_groups']}")
    Console(width=160).print(table)
    for scale in sorted({r["scale"] for r in rows}, reverse=True):
        sub = [r for r in rows if r["scale"] == scale]
        worst = max(sub, key=lambda r: r["algorithm1_over_optimal"])
        print(f"scale {scale:g}: plans identical in {sum(r['same_plan'] for r in sub)} of {len(sub)} cases; "
              f"largest gap {worst['model']} on {worst['cluster']}: Algorithm 1 "
              f"{100 * (worst['algorithm1_over_optimal'] - 1):.3f}% slower than the optimum")
    scales = sorted({r["scale"] for r in rows}, reverse=True)
    fig, axes = plt.subplots(len(scales), 1, figsize=(10, 2.6 * len(scales)), squeeze=False)
    labels = sorted({r["model"] for r in rows})
    for ax, scale in zip(axes[:, 0], scales):
        for i, cluster in enumerate(CLUSTERS):
            vals = [next((100 * (r["algorithm1_over_optimal"] - 1) for r in rows
                          if r["model"] == m and r["cluster"] == cluster and r["scale"] == scale), 0.0)
                    for m in labels]
            ax.bar([x + 0.27 * (i - 1) for x in range(len(labels))], vals, width=0.27, label=cluster)
        ax.set_xticks(range(len(labels)), labels, rotation=30, ha="right", fontsize=7)
        ax.set_ylabel("Alg. 1 over optimum (%)", fontsize=8)
        ax.set_title(f"compute x{scale:g}", fontsize=9)
    axes[0, 0].legend(fontsize=7)
    fig.suptitle("MG-WFBP merge plans: predicted iteration-time gap of Algorithm 1 (eq. 24)", fontsize=10)
    fig.tight_layout()
    fig.savefig(args.out / "mgwfbp-zoo.png", dpi=120)
    print(f"wrote {args.out}/mgwfbp-zoo.csv, .json, .png")


if __name__ == "__main__":
    main()
