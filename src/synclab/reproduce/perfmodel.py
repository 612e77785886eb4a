"""Engine ``model``: a point evaluated by Stanza's performance models, no cluster and no event simulation.

Stanza §7.2 (Fig. 8) is itself a numerical evaluation: throughput of Stanza from eq. 2–4 with the node
assignment of eq. 5, and of the PS baseline from eq. 6–7 with "the throughput-maximizing node assignment"
(§7.2), for N nodes in total. A target with ``engine: model`` reproduces such a figure by evaluating the
same equations (:mod:`synclab.plans.stanza`) on SyncLab's inputs:

* T_ps, one worker's forward + backward on its batch: the calibration row (``model.name``, the target's
  ``calibration_gpu``, ``model.batch_size``) of ``profiles/calibration.yaml``;
* T_c and T_f (Stanza's CONV and FC compute, eq. 2): T_ps split in the proportion of the checked-in CPU
  profile's ``boundary.conv_seconds`` : ``fc_seconds`` (caveat C1: the CPU's ratio, not the GPU's);
* A, P_c, P = P_c + P_f: the zoo model's counts (the profile's ``boundary``); K = ``model.batch_size``;
  B = ``network.rate``; N = ``nodes``; ``strategy.name`` one a closed form models (``Strategy.closed_form``:
  eq. 3 for Stanza, eq. 6 for the PS baseline); ``strategy.reading`` the
  reading of eq. 3/5 (:data:`synclab.plans.stanza.READINGS`, default ``algorithm``).

A point's overrides may name only these keys (:data:`INPUT_KEYS`); anything else is refused, since the
model could not honour it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

INPUT_KEYS = ("model.name", "model.batch_size", "network.rate", "nodes", "strategy.name", "strategy.reading")


def closed_form(strategy: str) -> str | None:
    """The Stanza closed form that models ``strategy`` (``Strategy.closed_form``: "eq3" or "eq6"), None if none;
    ValueError for an unknown strategy."""
    from synclab.strategies import registry

    try:
        return registry.get(strategy).closed_form
    except KeyError as e:
        raise ValueError(str(e).strip("\"'")) from None


def model_strategies() -> list[str]:
    """The registered strategies a closed form models (the ones ``engine: model`` takes)."""
    from synclab.strategies import registry

    return [n for n in registry.names() if registry.get(n).closed_form is not None]


@dataclass(frozen=True)
class ModelInputs:
    model: str
    batch_size: int
    bandwidth_bps: float
    nodes: int
    strategy: str
    reading: str = "algorithm"


def parse_inputs(overrides: list[str]) -> ModelInputs:
    """The model's inputs from a point's ``KEY=VALUE`` overrides (later ones win); ValueError names a bad key."""
    from synclab.config import parse_override
    from synclab.plans.stanza import READINGS
    from synclab.units import parse_rate_bps

    got: dict[str, Any] = {}
    for item in overrides:
        key, value = parse_override(item)
        if key not in INPUT_KEYS:
            raise ValueError(f"engine model: {key!r} is not an input of Stanza's performance model "
                             f"(it takes {', '.join(INPUT_KEYS)})")
        got[key] = value
    missing = [k for k in INPUT_KEYS[:5] if k not in got]
    if missing:
        raise ValueError(f"engine model: the point does not set {', '.join(missing)}")
    strategy, reading = str(got["strategy.name"]), str(got.get("strategy.reading", "algorithm"))
    if strategy not in model_strategies():
        raise ValueError(f"engine model: strategy.name must be one of {', '.join(model_strategies())}, got {strategy!r}")
    if reading not in READINGS:
        raise ValueError(f"engine model: strategy.reading must be one of {', '.join(READINGS)}, got {reading!r}")
    for key in ("model.batch_size", "nodes"):
        if isinstance(got[key], bool) or not isinstance(got[key], int) or got[key] < (2 if key == "nodes" else 1):
            raise ValueError(f"engine model: {key} must be an integer >= {2 if key == 'nodes' else 1}, got {got[key]!r}")
    bandwidth = parse_rate_bps(str(got["network.rate"]))
    if bandwidth <= 0:
        raise ValueError(f"engine model: network.rate must be > 0, got {got['network.rate']!r}")
    return ModelInputs(str(got["model.name"]), got["model.batch_size"], bandwidth, got["nodes"], strategy, reading)


def boundary_profile(model: str, batch_size: int) -> tuple[Path, Any]:
    """The checked-in CPU profile of ``model`` whose boundary gives the CONV/FC split: the one at
    ``batch_size`` if there is one, else the nearest batch (only the ratio T_c : T_f and the batch-free
    counts A, P_c, P_f are read from it)."""
    from synclab.compute.profile import available_profiles, load_model_profile

    found = [e for e in available_profiles(model) if e[2] == "cpu"]
    if not found:
        raise ValueError(f"engine model: no checked-in CPU profile of {model!r}")
    e = min(found, key=lambda e: (abs(e[1] - batch_size), e[1]))
    profile = load_model_profile(e[3])
    if profile.boundary is None:
        raise ValueError(f"engine model: {e[3].name} has no 'boundary' (CONV/FC split)")
    return e[3], profile.boundary


def evaluate(inputs: ModelInputs, compute_s: float, boundary: Any) -> dict[str, Any]:
    """Metrics of one point: throughput (samples/s, eq. 4 / eq. 7) at the throughput-maximizing split of
    ``inputs.nodes`` (eq. 5 for Stanza; n_s in 1..N-1 for PS, §7.2), with T_ps = ``compute_s``."""
    from synclab.plans.stanza import (
        PsProfile,
        StanzaProfile,
        choose_fc_workers,
        choose_ps_servers,
        ps_iteration_time,
        stanza_iteration_time,
    )

    if not compute_s > 0:
        raise ValueError(f"compute_s must be > 0, got {compute_s!r}")
    total = boundary.conv_seconds + boundary.fc_seconds
    conv_share = boundary.conv_seconds / total
    n, k = inputs.nodes, inputs.batch_size
    if closed_form(inputs.strategy) == "eq3":
        profile = StanzaProfile(conv_time_s=compute_s * conv_share, fc_time_s=compute_s * (1 - conv_share),
                                activations=boundary.activations_per_sample, batch_size=k,
                                conv_params=boundary.conv_params, bandwidth_bps=inputs.bandwidth_bps)
        servers = choose_fc_workers(n, profile, reading=inputs.reading)
        iteration = stanza_iteration_time(n - servers, servers, profile, inputs.reading)
    else:
        profile = PsProfile(compute_time_s=compute_s, params=boundary.conv_params + boundary.fc_params,
                            batch_size=k, bandwidth_bps=inputs.bandwidth_bps)
        servers = choose_ps_servers(n, profile)
        iteration = ps_iteration_time(n - servers, servers, profile)
    workers = n - servers
    return {"iteration_s": iteration, "throughput": workers * k / iteration, "compute_s": compute_s,
            "workers": workers, "servers": servers, "conv_share": conv_share, "speedup": None, "dilation": 1.0}
