"""The seeded search: Optuna's TPE sampler (a Bayesian optimiser: a tree-structured Parzen estimator of good
and bad regions, Bergstra et al., NeurIPS 2011) over :class:`~synclab.tune.space.Param` dimensions.

Optuna is used because it is maintained, seeds reproducibly (``TPESampler(seed=...)``), handles int, float and
log-scaled dimensions natively and runs in-process without a database. ``objective(values)`` returns the number
to minimise; a ``ValueError`` from it (a combination the spec refuses) makes the trial *failed*, recorded with
its message, and the search goes on.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from synclab.tune.space import Param


def search(objective: Callable[[dict[str, int | float]], float], params: list[Param], trials: int, *,
           seed: int = 0, on_trial: Callable[[dict[str, Any]], None] | None = None) -> list[dict[str, Any]]:
    """Run ``trials`` trials minimising ``objective``; returns one record per trial, in order:
    ``{"number", "params", "value", "state", "error"}`` (``value`` None for a failed trial)."""
    import optuna

    if trials < 1:
        raise ValueError(f"trials must be >= 1, got {trials}")
    logging.getLogger("optuna").setLevel(logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(
        seed=seed, n_startup_trials=min(10, max(1, trials // 3))))
    out: list[dict[str, Any]] = []
    for _ in range(trials):
        trial = study.ask()
        values = {p.key: (trial.suggest_int(p.key, int(p.low), int(p.high), log=p.log) if p.kind == "int"
                          else trial.suggest_float(p.key, p.low, p.high, log=p.log)) for p in params}
        record: dict[str, Any] = {"number": trial.number, "params": values, "value": None, "state": "complete",
                                  "error": None}
        try:
            value = float(objective(values))
        except ValueError as e:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
            record.update(state="failed", error=str(e))
        else:
            study.tell(trial, value)
            record["value"] = value
        out.append(record)
        if on_trial is not None:
            on_trial(record)
    return out


def best(trials: list[dict[str, Any]], k: int) -> list[dict[str, Any]]:
    """The ``k`` completed trials of lowest value, distinct parameter values only, best first."""
    seen, out = set(), []
    for t in sorted((t for t in trials if t["value"] is not None), key=lambda t: t["value"]):
        sig = tuple(sorted(t["params"].items()))
        if sig not in seen:
            seen.add(sig)
            out.append(t)
        if len(out) == k:
            break
    return out
