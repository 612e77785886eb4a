"""The ``SplitRoles`` model on the simulated clock: CONV and FC workers, their activations, recursive doubling.

What goes over which link is what a CONV/FC strategy (Stanza §4.1, §5.2, :mod:`synclab.strategies.stanza`)
sends; the roles come from the strategy's own ``make_plan`` (``conv_workers``, ``fc_workers``, ``boundary``),
the FC worker of each CONV worker from the ``groups`` its :class:`~synclab.strategies.simmodel.SplitRoles`
names, and the all-reduce rounds from :func:`synclab.collective.schedules.recursive_doubling_schedule`.
One iteration:

1. CONV worker r: gated forward of the ``features`` layers (profiled times), then two messages to its FC
   worker: the boundary activations (K·A values of ``elem_bytes``) and the labels (K int64);
2. FC worker: waits for every served CONV worker's two messages, gated forward and backward of the
   ``classifier`` layers once per served batch (replay's ``tail_step``), then to each CONV worker the
   gradients of its activations (as large as the activations) and its loss (one float);
3. CONV worker: backward of ``features`` once the activation gradients are in (the loss is awaited after);
4. on the communication thread (``on_backward_end``): one recursive-doubling all-reduce of all the role's
   gradients (every round moves the whole vector: P_c or P_f values) among the CONV workers, or among the
   FC workers (none when n_f = 1), then the SGD step of each own tensor (its ``update_seconds`` share),
   each tensor fresh after its step; the next forward waits on those gates.

Records as the emulator's: ``compute_s`` excludes gate waits and waiting for the peer role's messages;
only CONV workers count samples.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache

from synclab.collective.schedules import recursive_doubling_schedule
from synclab.sim.nodes import SimWorker

Callback = Callable[[], None]
LABEL_BYTES = 8   # int64 labels, one per sample
LOSS_BYTES = 4    # one float32: the mean loss of a CONV worker's samples


@lru_cache(maxsize=64)
def _schedule(n: int):
    return tuple(recursive_doubling_schedule(n))


class Mailbox:
    """Messages a simulated worker has received, by key, and who waits for how many of them."""

    def __init__(self):
        self._got: dict[tuple, int] = {}
        self._waiting: dict[tuple, tuple[int, Callback]] = {}

    def deliver(self, key: tuple) -> None:
        n = self._got[key] = self._got.get(key, 0) + 1
        w = self._waiting.get(key)
        if w is not None and n >= w[0]:
            del self._waiting[key], self._got[key]
            w[1]()

    def expect(self, key: tuple, count: int, then: Callback) -> None:
        if self._got.get(key, 0) >= count:
            self._got.pop(key, None)
            then()
        else:
            self._waiting[key] = (count, then)


def recursive_doubling(sim, group: list[int], rank: int, key: str, iteration: int, nbytes: int,
                       done: Callback) -> None:
    """Rank ``rank``'s part of a recursive-doubling all-reduce of ``nbytes`` among ``group`` (worker ranks):
    per round of the schedule, its whole-vector sends and the arrivals it waits for, as
    :func:`synclab.collective.recursive_doubling.recursive_doubling_allreduce_` executes them."""
    steps = _schedule(len(group))
    me = group.index(rank)
    src_node = f"worker{rank}"

    def round_(r: int) -> None:
        if r == len(steps):
            done()
            return
        transfers = steps[r].transfers
        incoming = [group[t.src] for t in transfers if t.dst == me]
        outgoing = [group[t.dst] for t in transfers if t.src == me]
        pending = [len(incoming) + len(outgoing)]
        if not pending[0]:
            round_(r + 1)
            return

        def one() -> None:
            pending[0] -= 1
            if pending[0] == 0:
                round_(r + 1)

        for src in incoming:
            sim.workers[rank].mailbox.expect(("rd", key, iteration, r, src), 1, one)
        for dst in outgoing:
            def delivered(dst=dst) -> None:
                sim.workers[dst].mailbox.deliver(("rd", key, iteration, r, rank))
                one()  # the sender's round waits for its sends to be through
            sim.cluster.send(src_node, f"worker{dst}", nbytes, delivered)

    round_(0)


class SplitRolesWorker(SimWorker):
    """A CONV or FC worker of the plan (e.g. :class:`synclab.strategies.stanza.StanzaPlan`)."""

    def __init__(self, sim, rank: int):
        super().__init__(sim, rank)
        plan = sim.plan
        n_c, n_f, boundary = plan.conv_workers, plan.fc_workers, plan.boundary
        self.is_fc = rank >= n_c
        groups = sim.model.groups(n_c, n_f)
        self.fc_of = {r: n_c + j for j, g in enumerate(groups) for r in g}
        self.served = list(groups[rank - n_c]) if self.is_fc else []
        self.group = list(range(n_c, sim.world)) if self.is_fc else list(range(n_c))
        n = len(sim.numels)
        self.own = list(range(boundary, n)) if self.is_fc else list(range(boundary))
        self.layers = sorted({sim.layer_of[i] for i in self.own})
        never, own = 1 << 60, set(self.own)  # tensors this worker does not train never close its gates
        self.fresh = [0 if i in own else never for i in range(n)]
        self.mailbox = Mailbox()
        self.key = "fc" if self.is_fc else "conv"
        self.act_bytes = sim.samples * sim.profile.boundary.activations_per_sample * sim.elem_bytes

    def _wait(self, key: tuple, count: int):
        ev = self.env.event()
        self.sim.net.events += 1
        self.mailbox.expect(key, count, lambda: ev.succeed())
        return ev

    def _backward(self, it: int, factor: float):
        sim, env = self.sim, self.env
        self._stale_count[it] = len(self.own)
        first = None
        for i in reversed(self.own):
            if sim.bwd[i] > 0:
                sim.net.events += 1
                yield env.timeout(sim.bwd[i] * factor)
            first = env.now if first is None else first
            sim.event(it, self.rank, i, "grad_ready")
        return first

    def _send(self, dst: int, nbytes: int, key: tuple) -> None:
        self.sim.cluster.send(self.node, f"worker{dst}", nbytes, lambda: self.sim.workers[dst].mailbox.deliver(key))

    def run(self):
        sim, env = self.sim, self.env
        prev = None
        for it in range(1, sim.iterations + 1):
            start = env.now
            peer_wait = 0.0
            if self.is_fc:
                t0 = env.now
                yield self._wait(("act", it), 2 * len(self.served))  # activations and labels of each
                peer_wait += env.now - t0
                gate_wait = yield from self._forward(it, self.layers, len(self.served))
                first = yield from self._backward(it, len(self.served))
                for r in self.served:
                    self._send(r, self.act_bytes, ("grad", it))
                    self._send(r, LOSS_BYTES, ("loss", it))
            else:
                gate_wait = yield from self._forward(it, self.layers)
                fc = self.fc_of[self.rank]
                self._send(fc, self.act_bytes, ("act", it))
                self._send(fc, sim.samples * LABEL_BYTES, ("act", it))
                t0 = env.now
                yield self._wait(("grad", it), 1)
                peer_wait += env.now - t0
                first = yield from self._backward(it, 1.0)
                t0 = env.now
                yield self._wait(("loss", it), 1)
                peer_wait += env.now - t0
            self.comm.submit(lambda done, it=it: self._pull_grad(it, done))
            sim.span(self.rank, "compute", it, start, env.now)
            if prev is not None:
                self._report(prev, start)
            prev = {"iteration": it, "start": start, "compute": env.now - start - gate_wait - peer_wait,
                    "first_grad": first}
        computed = env.now
        while self._stale_count:
            ev = self.layer_waiter[-1] = env.event()
            yield ev
        self._report(prev, computed)

    def _pull_grad(self, it: int, done: Callback) -> None:
        """``on_backward_end``: the all-reduce of this role's gradients, then SGD tensor by tensor."""
        sim = self.sim
        for i in self.own:
            sim.event(it, self.rank, i, "send_start")
        nbytes = sum(sim.numels[i] for i in self.own) * sim.elem_bytes

        def reduced() -> None:
            for i in self.own:
                sim.event(it, self.rank, i, "send_end")
            self._sgd(it, list(self.own), done)

        recursive_doubling(sim, self.group, self.rank, self.key, it, nbytes, reduced)

    def _sgd(self, it: int, tensors: list[int], done: Callback) -> None:
        if not tensors:
            done()
            return
        i = tensors[0]
        start = self.env.now

        def stepped() -> None:
            self.sim.span(self.rank, "update", it, start, self.env.now)
            self.mark_fresh(i, it)
            self._sgd(it, tensors[1:], done)

        self.sim.net.after(self.sim.update_s[i], stepped)

    def _report(self, prev: dict, end: float) -> None:
        super()._report(prev, end)
        if self.is_fc:
            self.rows[-1]["samples"] = 0
