"""The stock strategy models on the simulated clock, one per kind of :mod:`synclab.strategies.simmodel`.

A strategy declares its model (``Strategy.sim_model``) with its own parameters; :func:`model_for` maps the
declaration to the implementation here. Plans come from the code the real strategies call (their
``make_plan``: KVStore placement, P3 slices and priorities, :mod:`synclab.plans.sharding`,
:mod:`synclab.plans.slicing`), and a merged ring's groups from the planner the strategy names (MG-WFBP's
:func:`~synclab.plans.mgwfbp.algorithm1` or :func:`~synclab.plans.mgwfbp.optimal_plan`) on T(M) = a + b·M
fitted by :func:`synclab.plans.mgwfbp.fit_cost_model` and t_b from
:func:`synclab.compute.profile.backward_times`.

- :class:`RingModel` (``RingAllReduce``): per-tensor all-reduces (MG-WFBP §2.3), one whole-model all-reduce
  (§2.4), or merged groups (§4–5, Algorithm 2: a simulated fit at setup, P profiling iterations per tensor,
  the plan broadcast as a ring all-reduce, then the groups); :class:`LocalModel` without communication.
- :class:`PsModel` (``ParameterServer``): push, aggregate, update, then notify + pull or broadcast as the plan's
  ``server_mode`` says (P3 §4.1–4.2); :class:`AsgdModel` pushes then pulls (shards in ``async`` mode);
  :class:`SsdModel` follows the strategy's schedule (SSD-SGD §3, Algorithm 1: warm-up push + pull, then push
  + local update with a pull every k iterations, shards in ``pull`` mode).
- ``SplitRoles``: CONV and FC workers (:mod:`synclab.sim.split_roles`).
- ``OwnModel``: the strategy's own factory, called with a :class:`synclab.sim.api.ModelApi`.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable

from synclab.compute.profile import backward_times
from synclab.plans.mgwfbp import fit_cost_model, fit_sizes, group_layout
from synclab.sim.api import ModelApi, update_tensors
from synclab.strategies.simmodel import OwnModel, ParameterServer, RingAllReduce, SimModel, SplitRoles


class RingModel:
    """``RingAllReduce``: merge groups, each one ring all-reduce on the comm thread."""

    def __init__(self, sim, worker, model: RingAllReduce):
        self.sim, self.w, self.model = sim, worker, model
        n = len(sim.numels)
        self.groups: list[tuple[int, ...]] | None = None  # None: one tensor per all-reduce (WFBP)
        if model.groups == "whole-model":  # one group: all-reduced once the last gradient (backward's end) is in
            self.groups = [tuple(range(n - 1, -1, -1))]
        if model.groups == "buckets":  # fixed groups from the sizes (DDP's buckets), each reduced once full
            self.groups = list(model.buckets(sim.numels, sim.options).groups)
        self.profile_iterations = sim.options.profile_iterations if model.groups == "merged" else 0
        self._samples: list[tuple[float, list[float]]] = []
        self._use(self.groups)

    def _use(self, groups) -> None:
        self.groups = groups
        if groups is not None:
            self._group_of = {t: g for g, grp in enumerate(groups) for t in grp}
            self._missing = [len(g) for g in groups]
            self._turn = 0

    def on_gradient(self, it: int, i: int) -> None:
        self.w.comm.submit(lambda done: self._gradient(it, i, done))

    def _gradient(self, it: int, i: int, done) -> None:
        if self.groups is None:
            self._allreduce(it, (i,), done)
            return
        g = self._group_of[i]
        self._missing[g] -= 1
        ready = []
        while self._turn < len(self.groups) and self._missing[self._turn] == 0:
            ready.append(self._turn)
            self._missing[self._turn] = len(self.groups[self._turn])
            self._turn += 1
        if self._turn == len(self.groups):
            self._turn = 0
        self._chain(it, ready, done)

    def _chain(self, it: int, groups: list[int], done) -> None:
        if not groups:
            done()
            return
        self._allreduce(it, self.groups[groups[0]], lambda: self._chain(it, groups[1:], done))

    def _allreduce(self, it: int, tensors: tuple[int, ...], done) -> None:
        sim = self.sim
        for t in tensors:
            sim.event(it, 0, t, "send_start")

        def reduced() -> None:
            for t in tensors:
                sim.event(it, 0, t, "send_end")
            self._updates(it, list(tensors), done)

        sim.ring(sum(sim.numels[t] for t in tensors), reduced)

    def _updates(self, it: int, tensors: list[int], done) -> None:
        update_tensors(self.sim, self.w, it, tensors, done)

    def on_backward_end(self, it: int) -> None:
        if self.profile_iterations and it <= self.profile_iterations:  # §5.1: rank 0's stopwatch
            w = self.w
            self._samples.append((w.forward_s, backward_times(w.backward_start, list(w.ready))))
        if self.profile_iterations and it == self.profile_iterations:
            self.w.comm.submit(self._plan)

    def _plan(self, done) -> None:
        """Algorithm 2 line 8: rank 0 plans from the medians and broadcasts m as a ring all-reduce of L floats."""
        sim = self.sim
        t_f = statistics.median(s[0] for s in self._samples)
        t_b = [statistics.median(s[1][i] for s in self._samples) for i in range(len(sim.numels))]
        sizes = [n * sim.elem_bytes for n in sim.numels]
        choose = self.model.planner
        plan = choose(t_f, t_b, sizes, sim.cost)
        sim.plan_record = {"algorithm": choose.__name__, "a": sim.cost.a, "b": sim.cost.b, "t_f": t_f,
                           "groups": [list(g) for g in plan.groups], "cost_fit": sim.cost_fit}
        group_layout(plan, sim.numels)  # the layout the strategy allocates; checks the plan covers every tensor
        sim.ring(len(sim.numels), lambda: (self._use(list(plan.groups)), done()), elem_bytes=4)


def fit_ring_cost(sim, then: Callable[[], None]) -> None:
    """The setup of a merged ring (``RingAllReduce(fit_cost_model=True)``, MG-WFBP §5) on the simulated cluster: timed ring all-reduces of ``fit_sizes`` (an untimed
    round first), per-size medians fitted by :func:`fit_cost_model` (eq. 10, Fig. 4); sizes in bytes."""
    opts = sim.options
    sizes = opts.fit_sizes_params or fit_sizes(sum(sim.numels))
    plan = [(rnd, s) for rnd in range(-1, opts.fit_repeats) for s in sizes]
    timings: list[tuple[int, float]] = []

    def one(k: int) -> None:
        if k == len(plan):
            fit = fit_cost_model([m for m, _ in timings], [t for _, t in timings])
            sim.cost, sim.cost_fit = fit.model, fit.as_record()
            then()
            return
        rnd, s = plan[k]
        t0 = sim.env.now

        def timed() -> None:
            if rnd >= 0:
                timings.append((s * sim.elem_bytes, sim.env.now - t0))
            one(k + 1)

        sim.ring(s, timed)

    one(0)


class LocalModel(RingModel):
    """``RingAllReduce(groups="none")``: one process computes the global batch and updates; no communication."""

    def on_gradient(self, it: int, i: int) -> None:
        pass

    def on_backward_end(self, it: int) -> None:
        self.w.comm.submit(lambda done: self._updates(it, list(range(len(self.sim.numels))), done))


class PsModel:
    """``ParameterServer``: push; notify + pull or broadcast (slices, priorities) as the plan says. One per worker,
    sharing the shards."""

    def __init__(self, sim, worker, model: ParameterServer):
        self.sim, self.w = sim, worker
        self.broadcast = sim.plan.server_mode == "broadcast"
        self._landing: dict[tuple[int, int], int] = {}
        self._sent: dict[tuple[int, int], int] = {}
        self._notified: dict[tuple[int, str], int] = {}  # (iteration, key) -> slices notified (ps)

    def on_gradient(self, it: int, i: int) -> None:
        self._push(it, i)

    def _push_blocking(self, it: int, i: int, then) -> None:
        """``PsClient.push`` on the communication thread: each slice's ``Link.send`` waits while that link's
        send queue is full (``transport.queue_bytes``); ``then`` once every slice is queued."""
        sim = self.sim
        parts = sim.parts_of[i]
        sim.event(it, self.w.rank, i, "send_start")
        self._sent[(it, i)] = len(parts)

        def one(k: int) -> None:
            if k == len(parts):
                then()
                return
            p = parts[k]
            sim.cluster.send_blocking(self.w.node, f"ps{p.shard}", p.length * sim.elem_bytes,
                                      lambda: (self._pushed(it, i), sim.shards[p.shard].push(self.w.rank, p, it)),
                                      p.priority, lambda: one(k + 1))

        one(0)

    def _push(self, it: int, i: int, arrived: Callable[[], None] | None = None) -> None:
        """Every slice of tensor ``i``'s gradient to its shard; ``arrived`` after each slice is delivered."""
        sim, node = self.sim, self.w.node
        parts = sim.parts_of[i]
        sim.event(it, self.w.rank, i, "send_start")
        self._sent[(it, i)] = len(parts)

        def delivered(p) -> None:
            self._pushed(it, i)
            sim.shards[p.shard].push(self.w.rank, p, it)
            if arrived is not None:
                arrived()

        for p in parts:
            sim.cluster.send(node, f"ps{p.shard}", p.length * sim.elem_bytes, lambda p=p: delivered(p), p.priority)

    def _pushed(self, it: int, i: int) -> None:
        left = self._sent[(it, i)] = self._sent[(it, i)] - 1
        if left == 0:
            del self._sent[(it, i)]
            self.sim.event(it, self.w.rank, i, "send_end")

    def on_notify(self, p, it: int) -> None:
        """KVStore: once every slice of the key is notified, pull them all (P3 §4.2), as ``strategies.ps`` does."""
        parts = self.sim.parts_of[self.sim.index_of[p.key]]
        seen = self._notified.get((it, p.key), 0) + 1
        if seen < len(parts):
            self._notified[(it, p.key)] = seen
            return
        self._notified.pop((it, p.key), None)
        for q in parts:
            self.sim.cluster.send(self.w.node, f"ps{q.shard}", 0,
                                  lambda q=q: self.sim.shards[q.shard].pull(self.w.rank, q, it), q.priority)

    def _slice_landed(self, p, it: int) -> int | None:
        """Count one slice of its tensor's values for ``it`` in: the tensor's index once every slice is, else None."""
        i = self.sim.index_of[p.key]
        key = (it, i)
        left = self._landing.get(key, len(self.sim.parts_of[i])) - 1
        if left:
            self._landing[key] = left
            return None
        self._landing.pop(key, None)
        return i

    def on_params(self, p, it: int) -> None:
        i = self._slice_landed(p, it)
        if i is not None:
            self.w.mark_fresh(i, it)

    def on_backward_end(self, it: int) -> None:
        pass

    def _pull(self, it: int, i: int) -> None:
        """``PsClient.pull``: a pull request (no payload) for every slice of tensor ``i`` as of ``it``."""
        for q in self.sim.parts_of[i]:
            self.sim.cluster.send(self.w.node, f"ps{q.shard}", 0,
                                  lambda q=q: self.sim.shards[q.shard].pull_request(self.w.rank, q, it), q.priority)


class AsgdModel(PsModel):
    """``ParameterServer(client="push-pull")``: push a gradient, then pull it on the same stream (the reply includes the push); the gate
    opens when this worker's own round trip is back — it never waits for another worker."""

    def on_gradient(self, it: int, i: int) -> None:
        self._push(it, i)
        self._pull(it, i)


class PushThenPullModel(PsModel):
    """``ParameterServer(client="push-then-pull")`` (Stanza's PS, §5.2; eq. 6 of §7.1): nothing moves during
    backward; at its end, on the communication thread, every gradient is pushed (backward order), and once
    all of this worker's pushes have arrived every tensor is pulled (the shards, in ``pull`` mode, answer a
    pull once its iteration is applied); the gates open together when the last tensor has landed, as
    ``strategies.ps`` marks them fresh after its blocking pull. The emulator's worker pulls once its pushes
    are handed to gRPC; here once they have arrived (the rest of a chunk and the link's delay later)."""

    def on_gradient(self, it: int, i: int) -> None:
        pass

    def on_backward_end(self, it: int) -> None:
        self.w.comm.submit(lambda done: self._round(it, done))

    def _round(self, it: int, done) -> None:
        sim, n = self.sim, len(self.sim.numels)
        left = [sum(len(sim.parts_of[i]) for i in range(n))]
        self._landed_all, self._done = [n], done

        def arrived() -> None:
            left[0] -= 1
            if left[0] == 0:
                for i in range(n):
                    self._pull(it, i)

        for i in range(n - 1, -1, -1):
            self._push(it, i, arrived)

    def on_params(self, p, it: int) -> None:
        if self._slice_landed(p, it) is None:
            return
        self._landed_all[0] -= 1
        if self._landed_all[0] == 0:
            for j in range(len(self.sim.numels)):
                self.w.mark_fresh(j, it)
            self._done()


class SsdModel(PsModel):
    """``ParameterServer(client="scheduled-pull")`` (e.g. SSD-SGD): on the communication thread, per gradient, the push, then
    in the warm-up a pull into the live tensor; after it the GLU local update (the tensor's
    ``update_seconds`` share on the communication thread, as replay's ``update`` sleeps there), the gate
    opens, and every k-th iteration a pull into w'. A local update whose w' is still being pulled waits
    until the other pushes of backward have left (``on_backward_end``), then for its pull."""

    def __init__(self, sim, worker, model: ParameterServer):
        super().__init__(sim, worker, model)
        self.schedule = model.schedule(sim.options)
        self._into: set[tuple[int, int]] = set()         # (iteration, index) pulled into w', not the live tensor
        self._pending: dict[int, list[Callable[[], None]]] = {}  # index -> waiters for its pull into w'
        self._parked: list[tuple[int, int]] = []

    def on_gradient(self, it: int, i: int) -> None:
        self.w.comm.submit(lambda done: self._gradient(it, i, done))

    def _gradient(self, it: int, i: int, done) -> None:
        self._push_blocking(it, i, lambda: self._after_push(it, i, done))

    def _after_push(self, it: int, i: int, done) -> None:
        if self.schedule.is_warmup(it - 1):  # Algorithm 1 counts iterations from 0
            self._pull(it, i)
            done()
        elif i in self._pending:
            self._parked.append((it, i))
            done()
        else:
            self._local_update(it, i, done)

    def _local_update(self, it: int, i: int, done) -> None:
        sim, start = self.sim, self.sim.env.now
        step = self.schedule.step(it - 1)

        def updated() -> None:
            sim.span(self.w.rank, "update", it, start, sim.env.now)
            self.w.mark_fresh(i, it)
            if step.pull:  # line 22: the global weights of iteration it into w'
                self._pending[i] = []
                self._into.add((it, i))
                self._pull(it, i)
            done()

        sim.net.after(sim.update_s[i], updated)

    def on_backward_end(self, it: int) -> None:
        self.w.comm.submit(self._drain_parked)

    def _drain_parked(self, done) -> None:
        if not self._parked:
            done()
            return
        it, i = self._parked.pop(0)

        def go() -> None:
            self._local_update(it, i, lambda: self._drain_parked(done))

        if i in self._pending:
            self._pending[i].append(go)
        else:
            go()

    def on_params(self, p, it: int) -> None:
        i = self.sim.index_of[p.key]
        if (it, i) not in self._into:
            super().on_params(p, it)
            return
        if self._slice_landed(p, it) is None:
            return
        self._into.discard((it, i))
        for go in self._pending.pop(i, []):
            go()


class ShardCpu:
    """Host CPU seconds per value of a PS shard's own arithmetic, which the emulator's shards do for real
    and unscaled (:class:`synclab.ps.shard.Shard`): ``push_s`` summing a push into its round (``add_``),
    ``update_s`` the momentum-SGD step (``sgd_momentum_``), ``reply_s`` copying the values that answer
    pulls (``clone``). Off by default: the simulator models the PS as the papers' machines, whose update
    time is the profile's ``update_seconds`` (the emulator's shards hold the same with ``compute.ps_update:
    profile``); on, it models the emulator's host (``synclab simulate
    --shard-cpu PUSH,UPDATE,REPLY`` in ns per value, measured with ``synclab calibrate shard-cpu``).

    The emulator's shard sums a push chunk by chunk on the thread that receives it, while the next chunk is
    on the wire (:meth:`synclab.ps.shard.Shard.claim_sink`), so only the last chunk's sum delays the push,
    and it does not wait for the shard's one server (:class:`SimShard`)."""

    def __init__(self, push_s: float, update_s: float, reply_s: float):
        for name, v in (("push", push_s), ("update", update_s), ("reply", reply_s)):
            if not v >= 0:
                raise ValueError(f"shard CPU {name} seconds per value must be >= 0, got {v!r}")
        self.push_s, self.update_s, self.reply_s = push_s, update_s, reply_s


class SimShard:
    """A PS shard: aggregates every worker's push of a (key, slice, iteration), then applies the update —
    one at a time, in arrival order or by priority (``serve_order``) — and notifies or broadcasts."""

    def __init__(self, sim, index: int):
        self.sim, self.index, self.node = sim, index, f"ps{index}"
        self._count: dict[tuple[str, int, int], int] = {}
        self._queue: list = []
        self._busy = False
        self._seq = 0
        self._version: dict[tuple[str, int], int] = {}       # pull mode: (key, slice) -> last iteration applied
        self._applied: set[tuple[str, int, int, int]] = set()  # async: (key, slice, rank, iteration) applied
        self._waiting: dict[tuple[str, int], list] = {}        # (key, slice) -> pulls not answerable yet: (rank, p, it)

    def _job(self, order: int, seconds: float, fn: Callable[[], None]) -> None:
        """Queue work on the shard's one server (its consumer), served by ``order`` then arrival."""
        import heapq

        self._seq += 1
        heapq.heappush(self._queue, (order, self._seq, seconds, fn))
        if not self._busy:
            self._serve()

    def _serve(self) -> None:
        import heapq

        if not self._queue:
            self._busy = False
            return
        self._busy = True
        _, _, seconds, fn = heapq.heappop(self._queue)
        self.sim.net.after(seconds, lambda: (fn(), self._serve()))

    def _update_s(self, p) -> float:
        i = self.sim.index_of[p.key]
        cpu = self.sim.shard_cpu
        return self.sim.update_s[i] * p.length / self.sim.numels[i] + (cpu.update_s * p.length if cpu else 0.0)

    def push(self, rank: int, p, it: int) -> None:
        cpu = self.sim.shard_cpu
        if cpu is not None and self.sim.plan.server_mode != "async":  # the sum of the push's last chunk
            last = min(p.length, max(1, self.sim.spec.transport.chunk_bytes // self.sim.elem_bytes))
            self.sim.net.after(cpu.push_s * last, lambda: self._aggregate(rank, p, it))
        else:
            self._aggregate(rank, p, it)

    def _aggregate(self, rank: int, p, it: int) -> None:
        if self.sim.plan.server_mode == "async":  # every push applied on its own, in arrival order
            self._job(0, self._update_s(p), lambda: self._updated(p, it, rank))
            return
        key = (p.key, p.slice, it)
        n = self._count.get(key, 0) + 1
        if n < self.sim.world:
            self._count[key] = n
            return
        self._count.pop(key, None)
        order = p.priority if self.sim.plan.serve_order == "priority" else 0
        self._job(order, self._update_s(p), lambda: self._updated(p, it, None))

    def _updated(self, p, it: int, rank: int | None = None) -> None:
        sim = self.sim
        mode = sim.plan.server_mode
        if mode in ("pull", "async"):  # silent: answer the pulls this update makes answerable
            mark = (p.key, p.slice, rank, it) if mode == "async" else (p.key, p.slice)
            if mode == "async":
                self._applied.add(mark)
            else:
                self._version[mark] = max(self._version.get(mark, 0), it)
            self._answer(p)
            return
        for w in sim.workers:
            if sim.plan.server_mode == "broadcast":
                self.pull(w.rank, p, it)
            else:
                sim.cluster.send(self.node, w.node, 0, lambda w=w: w.strategy.on_notify(p, it), p.priority)

    def pull_request(self, rank: int, p, it: int) -> None:
        """A pull for iteration ``it``: answered once that iteration is applied (``pull``), or this worker's
        push of it (``async``: the shard handles a stream's push before the pull behind it)."""
        self._waiting.setdefault((p.key, p.slice), []).append((rank, p, it))
        self._answer(p)

    def _answerable(self, rank: int, p, it: int) -> bool:
        if self.sim.plan.server_mode == "async":
            return (p.key, p.slice, rank, it) in self._applied
        return self._version.get((p.key, p.slice), 0) >= it

    def _answer(self, p) -> None:
        waiting = self._waiting.get((p.key, p.slice))
        if not waiting:
            return
        ready = [w for w in waiting if self._answerable(*w)]
        for w in ready:
            waiting.remove(w)
            if self.sim.plan.server_mode == "async":
                self._applied.discard((p.key, p.slice, w[0], w[2]))
        if not ready:
            return
        cpu = self.sim.shard_cpu
        if cpu is None:
            for w in ready:
                self.pull(*w)
        else:  # one copy of the values answers the pulls ready together (Shard._answerable_pulls)
            self._job(0, cpu.reply_s * p.length, lambda: [self.pull(*w) for w in ready])

    def pull(self, rank: int, p, it: int) -> None:
        w = self.sim.workers[rank]
        self.sim.cluster.send(self.node, w.node, p.length * self.sim.elem_bytes,
                              lambda: w.strategy.on_params(p, it), p.priority)


def model_for(model: SimModel) -> Callable:
    """The factory ``(sim, worker) -> strategy model`` of a declared model (None where the worker class is the
    model: ``SplitRoles``, :mod:`synclab.sim.split_roles`)."""
    if isinstance(model, RingAllReduce):
        impl = LocalModel if model.groups == "none" else RingModel
        return lambda sim, worker: impl(sim, worker, model)
    if isinstance(model, ParameterServer):
        kinds = {"push": PsModel, "push-pull": AsgdModel, "scheduled-pull": SsdModel,
                 "push-then-pull": PushThenPullModel}
        return lambda sim, worker: kinds[model.client_for(sim.options)](sim, worker, model)
    if isinstance(model, SplitRoles):
        return lambda sim, worker: None
    if isinstance(model, OwnModel):
        return lambda sim, worker: model.factory(ModelApi(sim, worker))
    raise TypeError(f"unknown simulator model {model!r}: use one of synclab.strategies.simmodel")
