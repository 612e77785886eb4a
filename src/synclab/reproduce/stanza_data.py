"""Stanza Fig. 6 (b, c) and Fig. 7 metrics of one emulated run of a strategy a Stanza closed form models
(``Strategy.closed_form``: the PS baseline, eq. 6, or Stanza, eq. 3), from its records.

Stanza §6.3 defines the byte panels; SyncLab measures them from the payload bytes each worker counted per
iteration (``iterations.csv``, tensor bytes only, 4 B per fp32 value as the paper counts) and each PS
shard's whole-run total (``summary.json``; a ``ps`` shard sends nothing outside iterations). Every
iteration row is summed, warm-up included: the bytes of an iteration do not change from one to the next,
and a sum over all rows is immune to a send counted in the row before or after the one it belongs to.
One-off transfers outside the iterations (the initial parameters a worker hands a shard, the FC
parameters Stanza's FC worker hands rank 0 after the last iteration) are in no worker's sent bytes.

* ``data_mb_per_iteration`` — bytes every node sends in one iteration (each byte counted once, at its
  sender), 10^6 B per MB.
* ``fc_data_mb_per_iteration`` — Fig. 6b, "the amount of data transfer needed (in MB) to update the FC
  layer parameters in each iteration". Stanza with one FC worker: everything the FC worker sends and
  receives (activations and labels in, activation gradients and losses out: "the number of activations
  and corresponding gradients only"); measured. PS: the FC layers' share P_f / P of the measured
  per-iteration bytes (PS moves every parameter once each way per iteration; bytes are not recorded per
  tensor, so this share is arithmetic on a measured total).
* ``total_data_mb_per_epoch`` — Fig. 6c, "the total amount of data transfer (in MB) across all nodes in the
  system in an epoch": ``data_mb_per_iteration`` x floor(ImageNet-12 training images / global batch), the
  global batch measured (samples per iteration of all workers); the paper's "an epoch has 1251 iterations
  when we train AlexNet with 8 workers and a per-worker batch size of 128" is floor(1,281,167 / 1024).
* ``model_iteration_s`` — Fig. 7: the paper's own model of the point, eq. 3 (§4.2.1) for ``stanza`` with
  the run's n_c and n_f, eq. 6 (§7.1) for ``ps`` with its n_w workers and n_s shards, fed the constants the
  emulation replayed: T_ps = the replayed compute per iteration, T_c and T_f = the profile's CONV and FC
  seconds x compute.scale, A, P_c, P from the profile's boundary, K the batch, B the link rate. Eq. 3's
  all-reduce rounds are read as the algorithm the emulator runs (floor(log2 n_c) + 2 off powers of two);
  ``model_printed_iteration_s`` is eq. 3 with the printed ceil(log2 n_c) + 2 (equal at powers of two).
"""

from __future__ import annotations

from typing import Any, Iterable

from synclab.reproduce.perfmodel import closed_form

IMAGENET12_TRAIN_IMAGES = 1_281_167  # ILSVRC-2012 training set [external]; gives the paper's 1251 (8 x 128)
MB = 1e6


def _check_rows(rows: list[Any], iterations: int) -> None:
    if iterations < 1:
        raise ValueError(f"the run has {iterations} iterations; need >= 1")
    if not rows:
        raise ValueError("no iteration rows")


def data_metrics(rows: Iterable[Any], summary: dict, plan: dict | None, boundary: Any) -> dict[str, float]:
    """The byte metrics above from a run's iteration rows (objects with rank, samples, bytes_sent,
    bytes_received), its summary (strategy, iterations, bytes_sent per node, workers) and plan (stanza:
    roles); ``boundary`` carries conv_params and fc_params (the PS FC share)."""
    rows = list(rows)
    iterations = int(summary["iterations"])
    _check_rows(rows, iterations)
    strategy = summary["strategy"]
    worker_sent = sum(r.bytes_sent for r in rows)
    shard_sent = sum(v for node, v in (summary.get("bytes_sent") or {}).items() if node.startswith("ps"))
    per_iteration = (worker_sent + shard_sent) / iterations
    samples = sum(r.samples for r in rows) / iterations
    if samples <= 0:
        raise ValueError("the workers processed no samples")
    out = {"data_mb_per_iteration": per_iteration / MB, "global_batch": samples,
           "total_data_mb_per_epoch": per_iteration * (IMAGENET12_TRAIN_IMAGES // int(round(samples))) / MB}
    form = closed_form(strategy)
    if form == "eq3":
        roles = (plan or {}).get("roles") or {}
        fc_ranks = {int(name.removeprefix("worker")) for name, role in roles.items() if role == "fc"}
        if not fc_ranks:
            raise ValueError("plan.json names no FC worker (roles)")
        if len(fc_ranks) == 1:  # with n_f > 1 the FC workers' own all-reduce would be counted twice
            fc = [r for r in rows if r.rank in fc_ranks]
            out["fc_data_mb_per_iteration"] = sum(r.bytes_sent + r.bytes_received for r in fc) / iterations / MB
    elif form == "eq6":
        total = boundary.conv_params + boundary.fc_params
        out["fc_data_mb_per_iteration"] = per_iteration * boundary.fc_params / total / MB
    return out


def model_metrics(summary: dict, plan: dict | None, boundary: Any) -> dict[str, float]:
    """``model_iteration_s`` (and for stanza ``model_printed_iteration_s``) of the point: eq. 3 or eq. 6 with
    the constants the emulation replayed (see the module docstring); empty for another strategy."""
    from synclab.plans.stanza import PsProfile, StanzaProfile, ps_iteration_time, stanza_iteration_time

    form = closed_form(summary["strategy"])
    if form is None:
        return {}
    rate, scale = summary.get("link_rate_bps"), summary.get("compute_scale")
    if not rate or not scale or summary.get("compute_mode") != "replay":
        raise ValueError("eq. 3/6 need a replayed run (compute_scale) on a shaped link (link_rate_bps)")
    k = int(summary["batch_size"])
    if form == "eq6":
        profile = PsProfile(compute_time_s=float(summary["compute_replay_seconds"]),
                            params=boundary.conv_params + boundary.fc_params, batch_size=k, bandwidth_bps=rate)
        return {"model_iteration_s": ps_iteration_time(int(summary["workers"]), int(summary["ps_shards"]), profile)}
    n_c, n_f = int((plan or {})["conv_workers"]), int((plan or {})["fc_workers"])
    profile = StanzaProfile(conv_time_s=boundary.conv_seconds * scale, fc_time_s=boundary.fc_seconds * scale,
                            activations=boundary.activations_per_sample, batch_size=k,
                            conv_params=boundary.conv_params, bandwidth_bps=rate)
    return {"model_iteration_s": stanza_iteration_time(n_c, n_f, profile, "algorithm"),
            "model_printed_iteration_s": stanza_iteration_time(n_c, n_f, profile, "as-printed")}
