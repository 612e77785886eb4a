"""SSD-SGD's update rules and iteration schedule (Xu et al., SSD-SGD, §2.3-§3.4).

SSD-SGD trains with plain synchronous SGD for a warm-up, then every worker
pushes its gradient every iteration but pulls the global weights only every
k iterations; in between it moves its local weights w' with the GLU rule
(eq. 8), which mixes its own gradient with grad_sync, a global gradient
estimated from how far the weights moved since the last pull (§3.2.1, §3.3).

- ``sgd_momentum_step``: the servers' momentum SGD, in PyTorch's form.
- ``grad_sync`` and ``glu_local_update``: eq. 8 and the grad_sync derivation.
- ``SsdSchedule``: what Algorithms 1 and 2 do at a given iteration.

Sign convention. The paper prints eq. 1, 5, 6 and 8 with "+ lr * gradient",
but its own derivation of grad_sync (§3.2.1) uses the descent form
mom = -lr * (grad + wd * w) + m * mom, w <- w + mom. Only the descent form
makes grad_sync (pre_weight - w') * (1 - m) / (lr * k) a positive multiple
of the gradient, so eq. 8 is implemented as descent:
w' <- w' - loc_lr * (alpha * grad' + wd * w' + beta * grad_sync).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

__all__ = ["SsdSchedule", "SsdStep", "glu_local_update", "grad_sync", "sgd_momentum_step"]


def sgd_momentum_step(
    w: torch.Tensor,
    grad: torch.Tensor,
    buf: torch.Tensor | None,
    lr: float,
    momentum: float,
    weight_decay: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of momentum SGD as torch.optim.SGD does it (no dampening, no Nesterov).

    d = grad + wd * w; buf = m * buf + d (buf = d on the first step, when
    ``buf`` is None); w <- w - lr * buf. Returns new (w, buf); the inputs
    are not modified. With constant lr this is the servers' rule of §3.2.1
    (there mom = -lr * buf).
    """
    for name, value in (("lr", lr), ("momentum", momentum), ("weight_decay", weight_decay)):
        if not math.isfinite(value) or value < 0:  # torch.optim.SGD refuses these too
            raise ValueError(f"{name} must be finite and >= 0, got {value!r}")
    d = grad.add(w, alpha=weight_decay) if weight_decay != 0 else grad.clone()
    buf = d if buf is None else buf.mul(momentum).add(d)
    return w.add(buf, alpha=-lr), buf


def grad_sync(
    w_local: torch.Tensor, pre_weight: torch.Tensor, *, lr: float, momentum: float, k: int
) -> torch.Tensor:
    """grad_sync = (pre_weight - w') * (1 - m) / (lr * k) (§3.3).

    The servers' momentum SGD moves the weights by lr * grad / (1 - m) per
    step once the momentum has settled and the gradient is steady (the
    warm-up's purpose, §3.1-3.2.1); pre_weight holds the weights pulled k
    steps before, so the distance travelled over k steps gives back the
    gradient. The paper's derivation drops the lr * wd * w term of
    w_minus = (1 - lr * wd) * w_{t-2} - w_{t-1}; so does this formula.
    """
    if not math.isfinite(lr) or lr <= 0:
        raise ValueError(f"lr must be finite and > 0, got {lr!r}")
    if not 0 <= momentum < 1:
        raise ValueError(f"momentum must be in [0, 1), got {momentum!r}")
    if isinstance(k, bool) or not isinstance(k, int) or k < 1:
        raise ValueError(f"k must be an integer >= 1, got {k!r}")
    return (pre_weight - w_local) * ((1 - momentum) / (lr * k))


def glu_local_update(
    w_local: torch.Tensor,
    grad: torch.Tensor,
    pre_weight: torch.Tensor,
    *,
    lr: float,
    loc_lr: float,
    momentum: float,
    weight_decay: float,
    k: int,
    alpha: float = 2.0,
    beta: float = 0.5,
) -> torch.Tensor:
    """The GLU local update, eq. 8 in descent form (see the module docstring).

    w' <- w' - loc_lr * (alpha * grad' + wd * w' + beta * grad_sync), with
    grad_sync from ``grad_sync`` (§3.3). ``lr``, ``momentum`` and
    ``weight_decay`` are the servers' (Table 1: lr, m, wd); alpha = 2.0,
    beta = 0.5 and loc_lr = 4 * lr are the paper's grid-searched values
    (§4.1). Returns the new w'; the inputs are not modified.
    """
    if not math.isfinite(loc_lr) or loc_lr <= 0:
        raise ValueError(f"loc_lr must be finite and > 0, got {loc_lr!r}")
    sync = grad_sync(w_local, pre_weight, lr=lr, momentum=momentum, k=k)
    step = grad * alpha + w_local * weight_decay + sync * beta
    return w_local - step * loc_lr


@dataclass(frozen=True)
class SsdStep:
    """What a worker does in one iteration (Algorithms 1 and 2).

    - ``warmup``: an SSGD iteration: push, pull, use the pulled weights.
    - ``local_update``: run GLU after pushing (Algorithm 1 line 18).
    - ``init_pre_weight``: set pre_weight = w' before computing grad_sync
      (Algorithm 2 line 2: the first local update, grad_sync = 0).
    - ``refresh_pre_weight``: set pre_weight = w' after computing grad_sync
      (Algorithm 2 lines 4-5; w' is then the weights pulled one step before).
    - ``pull``: pull the global weights at the end of the iteration and copy
      them into w' (Algorithm 1 lines 8 and 22).
    - ``loc_update``: Algorithm 2's counter of local updates before this one
      (None in warm-up).
    """

    warmup: bool
    local_update: bool
    init_pre_weight: bool
    refresh_pre_weight: bool
    pull: bool
    loc_update: int | None


@dataclass(frozen=True)
class SsdSchedule:
    """Iteration plan of SSD-SGD with ``warmup`` SSGD iterations and k-step delay.

    Iterations are numbered from 0 (Algorithm 1's ``num``). ``warmup`` counts
    warm-up iterations, i.e. the paper's wp + 1, since Algorithm 1 runs
    ``while num <= wp``. Every worker pushes every iteration. After warm-up,
    with d = num - warmup the number of local updates done so far (Algorithm
    2's loc_update): pull when d % k == k - 1 (Algorithm 1 line 20), refresh
    pre_weight when d > 0 and d % k == 0 (Algorithm 2 line 4). The paper
    states these on num itself and asks (1 + wp) % k == 0 so that the two
    agree; counting from the end of warm-up gives that alignment for any
    warm-up length.
    """

    warmup: int
    k: int

    def __post_init__(self) -> None:
        if isinstance(self.warmup, bool) or not isinstance(self.warmup, int) or self.warmup < 0:
            raise ValueError(f"SsdSchedule.warmup must be an integer >= 0, got {self.warmup!r}")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 1:
            raise ValueError(f"SsdSchedule.k must be an integer >= 1, got {self.k!r}")

    def is_warmup(self, iteration: int) -> bool:
        return self._check(iteration) < self.warmup

    def pulls(self, iteration: int) -> bool:
        return self.step(iteration).pull

    def refreshes_pre_weight(self, iteration: int) -> bool:
        return self.step(iteration).refresh_pre_weight

    def step(self, iteration: int) -> SsdStep:
        if self.is_warmup(iteration):
            return SsdStep(
                warmup=True,
                local_update=False,
                init_pre_weight=False,
                refresh_pre_weight=False,
                pull=True,
                loc_update=None,
            )
        d = iteration - self.warmup
        return SsdStep(
            warmup=False,
            local_update=True,
            init_pre_weight=d == 0,
            refresh_pre_weight=d > 0 and d % self.k == 0,
            pull=d % self.k == self.k - 1,
            loc_update=d,
        )

    @staticmethod
    def _check(iteration: int) -> int:
        if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
            raise ValueError(f"iteration must be an integer >= 0, got {iteration!r}")
        return iteration
