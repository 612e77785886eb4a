"""Host CPU of a PS shard's own arithmetic, per value (``synclab calibrate shard-cpu``): what
``synclab simulate --shard-cpu PUSH,UPDATE,REPLY`` takes.

The emulator's shards (:class:`synclab.ps.shard.Shard`) do their arithmetic for real on the host, unscaled by
``compute.scale``: a push is summed into its round (``add_``, chunk by chunk as it arrives), a complete round
(or, in ``async`` mode, every push) is applied by ``sgd_momentum_``, and pull answers are a ``clone`` of the
values. This times those three operations on one tensor (default: half of ResNet-50, what each of two shards
holds) with torch's default thread count (the PS role sets none), the median of the repeats.
"""

from __future__ import annotations

import statistics
import time


def measure(values: int, repeats: int = 7, threads: int | None = None) -> dict[str, float]:
    """Median seconds per value of the shard's push (``add_`` into the round's sum), update and reply."""
    import torch

    from synclab.ps.optimizer import sgd_momentum_

    if values < 1 or repeats < 1:
        raise ValueError(f"values and repeats must be >= 1, got {values}, {repeats}")
    if threads is not None:
        torch.set_num_threads(threads)
    g = torch.Generator().manual_seed(0)
    w, grad = torch.randn(values, generator=g), torch.randn(values, generator=g)
    total, buf = torch.zeros(values), torch.zeros(values)

    def median(fn) -> float:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
        return statistics.median(times) / values

    clone = median(lambda: grad.clone())
    add = median(lambda: total.add_(grad))
    update = median(lambda: sgd_momentum_(w, grad, buf, lr=0.05, momentum=0.9, weight_decay=1e-4))
    return {"clone_s": clone, "add_s": add, "push_s": add, "update_s": update, "reply_s": clone,
            "threads": torch.get_num_threads()}


