"""Held-out evaluation during a run (``run.eval_every``) and its record, ``eval.csv``.

Which parameters are "the model". Rank 0 evaluates its own parameters once
every gate is open after an iteration: the parameters its next forward pass
would compute with, and what it saves as ``params.pt`` at the end. Under the
synchronous strategies these are the global model (equal to ``local``'s);
under ``asgd`` the server's values as of rank 0's latest pull (its own push
and whatever the others pushed before); under ``ssdsgd`` after the warm-up the
local weights w' (the GLU result, SSD-SGD eq. 8), which is what a worker of the
paper computes and would be scored with, not the servers' w_t.

Evaluation changes nothing in training: no gradients, the model in eval mode
(no dropout draws, no BatchNorm statistics updated) and back, the RNG state
untouched, and rank 0's iteration records end before it starts. Like a
checkpoint, an evaluated iteration is drained first (its sync completes before
the next forward starts), so the synchronous strategies' math is unchanged;
under ``asgd`` the pause (drain plus scoring, a few ms for digits) lets the
other workers run a little ahead, and ASGD's result depends on such timing
anyway; ``ssdsgd``'s does not (its servers wait for every worker's push).
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F

EVAL_COLUMNS = ["iteration", "epoch", "time_s", "test_loss", "test_accuracy", "test_samples"]


@dataclass(frozen=True, slots=True)
class HeldOutScore:
    loss: float        # mean cross-entropy over the held-out samples
    accuracy: float    # top-1, in [0, 1]
    samples: int


def evaluate(model: nn.Module, x: torch.Tensor, y: torch.Tensor, device: torch.device,
             chunk: int = 4096) -> HeldOutScore:
    """Top-1 accuracy and mean cross-entropy of ``model`` on ``(x, y)``, without touching its training state."""
    if len(x) != len(y) or len(x) == 0:
        raise ValueError(f"evaluate needs as many labels as samples (and some), got {len(x)} and {len(y)}")
    was_training = model.training
    model.eval()
    loss_sum, correct = 0.0, 0
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):
            for lo in range(0, len(x), chunk):
                xb, yb = x[lo:lo + chunk].to(device), y[lo:lo + chunk].to(device)
                out = model(xb)
                loss_sum += float(F.cross_entropy(out, yb, reduction="sum"))
                correct += int((out.argmax(1) == yb).sum())
    finally:
        model.train(was_training)
    return HeldOutScore(loss_sum / len(x), correct / len(x), len(x))


def eval_iterations(iterations: int, every: int, resume_from: int = 0) -> list[int]:
    """The iterations after which a run evaluates: 0 (the initial model), every ``every``-th and the last;
    a restarted run only those after ``resume_from``."""
    if not every:
        return []
    its = {0, *range(every, iterations + 1, every), iterations}
    return sorted(i for i in its if i > resume_from or (i == 0 and resume_from == 0))


class EvalLog:
    """``eval.csv`` written row by row (flushed), so a crashed run keeps what it measured; a restarted one keeps
    the rows up to its checkpoint and continues after them."""

    def __init__(self, path: Path, resume_from: int = 0):
        self.path = path
        kept = [r for r in read_eval(path) if r["iteration"] <= resume_from] if resume_from else []
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=EVAL_COLUMNS)
            w.writeheader()
            w.writerows(kept)

    def write(self, iteration: int, epoch: float, time_s: float, score: HeldOutScore) -> None:
        with self.path.open("a", newline="") as f:
            csv.DictWriter(f, fieldnames=EVAL_COLUMNS).writerow(
                {"iteration": iteration, "epoch": round(epoch, 6), "time_s": round(time_s, 6),
                 "test_loss": score.loss, "test_accuracy": score.accuracy, "test_samples": score.samples})


def read_eval(path: Path) -> list[dict]:
    """The rows of an ``eval.csv`` with numbers parsed; [] when there is none."""
    if not path.is_file():
        return []
    with path.open(newline="") as f:
        return [{"iteration": int(r["iteration"]), "epoch": float(r["epoch"]), "time_s": float(r["time_s"]),
                 "test_loss": float(r["test_loss"]), "test_accuracy": float(r["test_accuracy"]),
                 "test_samples": int(r["test_samples"])} for r in csv.DictReader(f)]


def summarize_eval(rows: list[dict]) -> dict:
    """summary.json's evaluation fields: the last evaluation (the trained model) and the best one."""
    if not rows:
        return {}
    last = max(rows, key=lambda r: r["iteration"])
    best = max(rows, key=lambda r: (r["test_accuracy"], -r["iteration"]))
    return {"final_test_accuracy": last["test_accuracy"], "final_test_loss": last["test_loss"],
            "final_eval_iteration": last["iteration"], "best_test_accuracy": best["test_accuracy"],
            "best_eval_iteration": best["iteration"], "test_samples": last["test_samples"],
            "evaluations": len(rows)}
