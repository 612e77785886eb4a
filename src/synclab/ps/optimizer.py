"""The update rule run by PS shards and by workers that own their optimizer.

SGD with momentum and weight decay in PyTorch's convention (``torch.optim.SGD``
with dampening 0, no Nesterov), so a distributed run can be compared bit-for-bit
in structure with the single-process reference.
"""

from __future__ import annotations

import torch


@torch.no_grad()
def sgd_momentum_(param: torch.Tensor, grad: torch.Tensor, buf: torch.Tensor | None, *, lr: float,
                  momentum: float, weight_decay: float) -> torch.Tensor | None:
    """Update ``param`` in place; returns the (new) momentum buffer.

    d = g + wd·w;  buf = m·buf + d  (buf = d on the first step);  w ← w − lr·buf.
    """
    d = grad.add(param, alpha=weight_decay) if weight_decay else grad
    if momentum:
        if buf is None:
            buf = torch.clone(d).detach()
        else:
            buf.mul_(momentum).add_(d)
        d = buf
    param.add_(d, alpha=-lr)
    return buf
