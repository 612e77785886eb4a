"""``asgd``: asynchronous parameter-server SGD, the ASGD baseline SSD-SGD sets itself against (SSD-SGD §1).

Each worker pushes a tensor's gradient as soon as backward produces it and
pulls that tensor right after (the KVWorker's push-then-pull). The shard (mode
``async``, :mod:`synclab.ps.shard`) applies every push on its own the moment
it arrives — no waiting for, or averaging with, the other workers, as MXNet's
``dist_async`` KVStore does — with the configured lr (not divided by the number
of workers) and one momentum buffer per parameter shared by all pushes. The
pull is answered with the latest values, which include this worker's push and
whatever the others pushed so far; the next forward pass of a layer waits only
for this worker's own round trip, never for another worker.
"""

from __future__ import annotations

from synclab.strategies.ps import PsStrategy
from synclab.strategies.registry import register
from synclab.strategies.simmodel import ParameterServer


@register
class Asgd(PsStrategy):
    name = "asgd"
    server_mode = "async"
    sim_model = ParameterServer(client="push-pull")
    lockstep = False  # no worker waits for another (the summary counts each worker's own pace)

    @classmethod
    def paper_label(cls, overrides, lr):
        return f"ASGD, lr {float(overrides.get('optimizer.lr', lr)):g}"

    def on_gradient(self, iteration, index, grad):
        self.client.push(iteration, index, grad)
        self.client.pull(iteration, index)  # same stream, after the push: the reply includes it
