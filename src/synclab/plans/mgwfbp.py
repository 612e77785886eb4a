"""Gradient merge plans for all-reduce S-SGD: WFBP, SyncEASGD and MG-WFBP.

Implements Shi, Chu & Li, "MG-WFBP: Merging Gradients Wisely for Efficient
Communication in Distributed Deep Learning":

- the all-reduce cost model T_ar(M) = a + b*M (eq. 10), fitted from
  measurements as in Fig. 4 by non-negative least squares on per-size medians;
- the paper's model of one iteration's time for a merge plan: the backward
  start times tau_b (eq. 6), the communication start times tau_c (eq. 7, with
  eq. 12-14 for merged-gradient layers) and the objective t_iter (eq. 8/24);
- Algorithm 1 exactly as printed (the merge rule of Theorem 1, eq. 38);
- the exact minimum of the same objective over all contiguous merge plans, by
  dynamic programming (``optimal_plan``) and by enumeration
  (``brute_force_plan``). Theorem 1 claims Algorithm 1 attains that minimum;
  it does not always (see ``algorithm1`` and the tests).

Layer ordering. The paper numbers layers 1..L from the input side: forward
runs 1..L, backward runs L..1, so layer L's gradients are ready first. Every
sequence argument here (``t_b``, ``sizes``) is indexed the same way, 0-based:
Python index ``i`` is the paper's layer ``l = i + 1``; index 0 is the layer
nearest the input and index L-1 the one nearest the loss. "Layer" means one
gradient tensor (the paper's footnote 5).

Per-tensor t_b come from measured gradient-ready times through
:func:`synclab.compute.profile.backward_times`, which owns that rule.

Sizes are in whatever unit the cost model was fitted in (the paper's
Algorithm 1 uses parameter counts p, Fig. 4 uses bytes 4p); times in seconds.
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

__all__ = [
    "CostFit",
    "CostModel",
    "MergePlan",
    "NoBandwidthSignal",
    "algorithm1",
    "brute_force_plan",
    "comm_timeline",
    "decode_merged",
    "fit_cost_model",
    "fit_sizes",
    "group_layout",
    "iteration_time",
    "non_overlapped_comm",
    "optimal_plan",
    "synceasgd_plan",
    "wfbp_plan",
]


@dataclass(frozen=True)
class CostModel:
    """All-reduce time T_ar(M) = a + b*M (eq. 10).

    ``a`` is the start-up time of one all-reduce (seconds), ``b`` the
    transmission-and-reduction time per unit of size (seconds per unit).
    Table 2 of the paper gives a and b for common all-reduce algorithms.
    """

    a: float
    b: float

    def __post_init__(self) -> None:
        for name in ("a", "b"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"CostModel.{name} must be finite and >= 0, got {value!r}")

    def time(self, size: float) -> float:
        """T_ar(size) = a + b*size (eq. 10)."""
        return self.a + self.b * size


class NoBandwidthSignal(ValueError):
    """The measured times do not grow with the message size: no b > 0 fits them."""


@dataclass(frozen=True)
class CostFit:
    """A fitted :class:`CostModel` with what the fit saw: per-size medians, residuals and R²."""

    model: CostModel
    sizes: tuple[float, ...]          # distinct sizes, ascending
    median_times: tuple[float, ...]   # the median of the repeats at each size
    residuals: tuple[float, ...]      # median_time - T(size), per size
    r2: float                         # 1 - SSE/SST over the medians (1.0 when every median is equal and fitted)
    bound: str                        # "none" (interior optimum), "a=0" or "b=0": which constraint is active

    def as_record(self) -> dict:
        """The fit as plain JSON-able values, for plan.json and logs."""
        return {"a": self.model.a, "b": self.model.b, "r2": self.r2, "bound": self.bound,
                "sizes": list(self.sizes), "median_seconds": list(self.median_times),
                "residuals": list(self.residuals)}


def fit_cost_model(sizes: Sequence[float], times: Sequence[float]) -> CostFit:
    """Fit T(M) = a + b*M (eq. 10) to measured all-reduce times, as in Fig. 4, with a >= 0 and b >= 0.

    §4 defines ``a`` as the start-up time and ``b`` as the per-byte time, so both
    are non-negative. ``sizes`` may repeat: each size's repeats are reduced to
    their median first, so a single slow repeat moves nothing. The line is then
    the non-negative least-squares fit to those medians. With two unknowns it has
    a closed form: the objective is a convex quadratic, so its minimum over the
    quadrant a, b >= 0 is the unconstrained minimum when that is feasible, and
    otherwise the better of the minima on the two boundary rays (a = 0:
    b = Σ M·t / Σ M²; b = 0: a = mean t), each clamped at 0.

    Raises :class:`NoBandwidthSignal` when the constrained fit has b = 0 (the
    times do not grow with the size: no plan can be derived from them), and
    ``ValueError`` for malformed input.
    """
    if len(sizes) != len(times):
        raise ValueError(f"sizes and times differ in length: {len(sizes)} != {len(times)}")
    for name, values in (("sizes", sizes), ("times", times)):
        if not all(math.isfinite(v) for v in values):
            raise ValueError(f"{name} must be finite numbers")
    by_size: dict[float, list[float]] = {}
    for m, t in zip(sizes, times, strict=True):
        by_size.setdefault(float(m), []).append(float(t))
    if len(by_size) < 2:
        raise ValueError("sizes must contain at least 2 distinct values to fit a + b*M")
    ms = sorted(by_size)
    ts = [statistics.median(by_size[m]) for m in ms]

    def sse(a: float, b: float) -> float:
        return sum((t - a - b * m) ** 2 for m, t in zip(ms, ts))

    n = len(ms)
    mean_m, mean_t = sum(ms) / n, sum(ts) / n
    sxx = sum((m - mean_m) ** 2 for m in ms)
    b = sum((m - mean_m) * (t - mean_t) for m, t in zip(ms, ts)) / sxx
    a = mean_t - b * mean_m
    if a >= 0 and b >= 0:
        bound = "none"
    else:
        smm = sum(m * m for m in ms)
        ray_a0 = (0.0, max(0.0, sum(m * t for m, t in zip(ms, ts)) / smm) if smm > 0 else 0.0)
        ray_b0 = (max(0.0, mean_t), 0.0)
        (a, b), bound = min(((ray_a0, "a=0"), (ray_b0, "b=0")), key=lambda c: sse(*c[0]))
    if b <= 0:
        raise NoBandwidthSignal(
            "the all-reduce times do not grow with the message size (the best fit of T(M) = a + b*M with "
            f"a, b >= 0 has b = 0; medians {dict(zip(ms, ts))}): every size took about the same time, so the "
            "sizes carry no bandwidth signal"
        )
    model = CostModel(a=a, b=b)
    residuals = tuple(t - model.time(m) for m, t in zip(ms, ts))
    sst = sum((t - mean_t) ** 2 for t in ts)
    err = sum(r * r for r in residuals)
    r2 = 1.0 - err / sst if sst > 0 else (1.0 if err == 0 else 0.0)
    return CostFit(model, tuple(ms), tuple(ts), residuals, r2, bound)


@dataclass(frozen=True)
class MergePlan:
    """A partition of the L gradient tensors into all-reduce groups.

    ``groups`` lists the groups in the order they are communicated (backward
    order); each group lists its tensor indices in backward order too, i.e.
    descending. Groups are contiguous runs of layers: merging only ever joins
    a layer l with l-1 (Definition 1), so the plan is equivalent to the
    paper's vector m of normal (l_n) / merged-gradient (l_m) layers, eq. 22.
    A group is all-reduced once its last tensor (the lowest index) is ready.
    """

    groups: tuple[tuple[int, ...], ...]

    def __post_init__(self) -> None:
        flat = [i for group in self.groups for i in group]
        if not flat or any(not group for group in self.groups):
            raise ValueError("MergePlan.groups must be non-empty groups of tensor indices")
        if flat != list(range(len(flat) - 1, -1, -1)):
            raise ValueError(
                "MergePlan.groups must list tensors L-1..0 in backward order, each exactly once"
            )

    @property
    def num_tensors(self) -> int:
        return sum(len(group) for group in self.groups)

    def group_of(self, tensor: int) -> int:
        """Position (in communication order) of the group holding ``tensor``."""
        return self.tensor_to_group()[tensor]

    def tensor_to_group(self) -> tuple[int, ...]:
        """For each tensor index, the position of its group."""
        owner = [0] * self.num_tensors
        for position, group in enumerate(self.groups):
            for tensor in group:
                owner[tensor] = position
        return tuple(owner)

    def merged_flags(self) -> tuple[bool, ...]:
        """The paper's m (eq. 22): True where the layer is merged-gradient (l_m).

        Layer i is merged-gradient when its gradients go with layer i-1, i.e.
        it is not the last tensor of its group. Index 0 is always False.
        """
        flags = [True] * self.num_tensors
        for group in self.groups:
            flags[group[-1]] = False
        return tuple(flags)

    @classmethod
    def from_merged_flags(cls, merged: Sequence[bool]) -> MergePlan:
        """Build the plan from m; walks layers L-1..0 like Algorithm 2 lines 25-30."""
        if not merged:
            raise ValueError("merged must have one flag per tensor")
        if merged[0]:
            raise ValueError("tensor 0 (the paper's layer 1) cannot be a merged-gradient layer")
        groups: list[tuple[int, ...]] = []
        buffer: list[int] = []
        for i in range(len(merged) - 1, -1, -1):
            buffer.append(i)
            if not merged[i]:
                groups.append(tuple(buffer))
                buffer = []
        return cls(tuple(groups))


def _check_inputs(t_f: float, t_b: Sequence[float], sizes: Sequence[float]) -> None:
    if len(t_b) != len(sizes):
        raise ValueError(f"t_b and sizes differ in length: {len(t_b)} != {len(sizes)}")
    if not t_b:
        raise ValueError("t_b and sizes need at least one layer")
    if not math.isfinite(t_f) or t_f < 0:
        raise ValueError(f"t_f must be finite and >= 0, got {t_f!r}")
    for name, values in (("t_b", t_b), ("sizes", sizes)):
        for i, value in enumerate(values):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name}[{i}] must be finite and >= 0, got {value!r}")


def _ready_times(t_f: float, t_b: Sequence[float]) -> list[float]:
    """tau_b^(l) + t_b^(l) for every layer: when its gradients are ready (eq. 6)."""
    ready = [0.0] * len(t_b)
    tau_b = t_f  # tau_b^(L) = t_f
    for i in range(len(t_b) - 1, -1, -1):
        ready[i] = tau_b + t_b[i]
        tau_b = ready[i]  # tau_b^(l) = tau_b^(l+1) + t_b^(l+1)
    return ready


def comm_timeline(
    plan: MergePlan, t_f: float, t_b: Sequence[float], sizes: Sequence[float], cost: CostModel
) -> list[tuple[float, float]]:
    """(start, end) of each group's all-reduce, in communication order.

    A group starts when its last tensor's gradients are ready and the previous
    all-reduce has finished: tau_c = max{tau_c' + t_c', tau_b + t_b} (eq. 7,
    with eq. 14 for merged-gradient layers), and lasts T_ar(sum of its sizes)
    (eq. 13, 23). Time 0 is the start of the forward pass.
    """
    _check_inputs(t_f, t_b, sizes)
    if plan.num_tensors != len(sizes):
        raise ValueError(f"plan covers {plan.num_tensors} tensors but sizes has {len(sizes)}")
    ready = _ready_times(t_f, t_b)
    timeline = []
    end = -math.inf
    for group in plan.groups:
        start = max(end, ready[group[-1]])
        end = start + cost.time(sum(sizes[i] for i in group))
        timeline.append((start, end))
    return timeline


def iteration_time(
    plan: MergePlan, t_f: float, t_b: Sequence[float], sizes: Sequence[float], cost: CostModel
) -> float:
    """The paper's model of t_iter for a merge plan (eq. 8, the objective of eq. 24).

    t_iter = tau_c^(1) + t_c^(1): the end of the last all-reduce, which always
    contains layer 1 (index 0); tau_b^(L) = t_f, so it includes the forward
    pass. The model ignores the update time t_u, as the paper does (§2.1).
    """
    return comm_timeline(plan, t_f, t_b, sizes, cost)[-1][1]


def non_overlapped_comm(
    plan: MergePlan, t_f: float, t_b: Sequence[float], sizes: Sequence[float], cost: CostModel
) -> float:
    """t_c^no = t_iter - (t_f + t_b): communication not hidden by computation (§2.3, Fig. 8)."""
    return iteration_time(plan, t_f, t_b, sizes, cost) - (t_f + sum(t_b))


def wfbp_plan(num_tensors: int) -> MergePlan:
    """WFBP (§2.3): every layer is all-reduced on its own, as soon as it can be."""
    if num_tensors < 1:
        raise ValueError(f"num_tensors must be >= 1, got {num_tensors}")
    return MergePlan(tuple((i,) for i in range(num_tensors - 1, -1, -1)))


def synceasgd_plan(num_tensors: int) -> MergePlan:
    """SyncEASGD (§2.4): one all-reduce of all gradients after the backward pass."""
    if num_tensors < 1:
        raise ValueError(f"num_tensors must be >= 1, got {num_tensors}")
    return MergePlan((tuple(range(num_tensors - 1, -1, -1)),))


def algorithm1(
    t_f: float, t_b: Sequence[float], sizes: Sequence[float], cost: CostModel
) -> MergePlan:
    """Algorithm 1 of §4.2 ("Find optimal m"), line by line.

    The paper's arrays t_b[1..L], p[1..L], t_c, tau_b, tau_c and m are the
    Python lists below indexed 0..L-1 (paper index l is Python index l-1), so
    "for l = L -> 2" becomes ``for i in range(L-1, 0, -1)``. tau_b[L] = 0 as
    in line 6 rather than t_f as in eq. 6: line 11 only compares differences
    of timestamps, so the offset does not change m. ``t_f`` is accepted for
    symmetry with ``iteration_time`` and validated, not otherwise used.

    Line 11 is the merge rule of Theorem 1 (eq. 38): merge layer l into l-1
    iff tau_b[l-1] + t_b[l-1] - tau_c[l] < a, strict, as printed.

    Theorem 1 says the result minimises eq. 24 over all plans. It does not in
    general: the rule decides each layer greedily by the end time of the next
    all-reduce, but a merge also enlarges the pending group, and that bigger
    message can then be held back behind a later layer's computation. For
    instance a = 2, b = 1, t_f = 0, t_b = (2, 1, 1), p = (1, 1, 1): Algorithm 1
    merges layer 3 into 2 and gets t_iter = 9, while sending layer 3 alone and
    merging 2 into 1 gives 8. Lemma 1's one-layer argument is exact for L <= 2
    only. ``optimal_plan`` gives the true minimum of the same objective.
    """
    _check_inputs(t_f, t_b, sizes)
    a, b = cost.a, cost.b
    L = len(t_b)
    p = list(sizes)  # the paper's p, updated in place by MERGE (line 18)
    l_n, l_m = False, True
    # lines 1-5: t_c[l] = a + b * p[l]; m[l] = l_n
    t_c = [a + b * p[i] for i in range(L)]
    m = [l_n] * L
    # lines 6-8: tau_b[L] = 0; tau_b[l] = tau_b[l+1] + t_b[l+1]
    tau_b = [0.0] * L
    for i in range(L - 2, -1, -1):
        tau_b[i] = tau_b[i + 1] + t_b[i + 1]

    def calculate_comm_start() -> list[float]:  # lines 20-25
        tau_c = [0.0] * L
        tau_c[L - 1] = tau_b[L - 1] + t_b[L - 1]
        for i in range(L - 2, -1, -1):
            tau_c[i] = max(tau_c[i + 1] + t_c[i + 1], tau_b[i] + t_b[i])
        return tau_c

    def merge(i: int) -> None:  # lines 16-19, i is the paper's l - 1
        t_c[i] = 0.0
        p[i - 1] = p[i - 1] + p[i]
        t_c[i - 1] = a + b * p[i - 1]

    tau_c = calculate_comm_start()  # line 9
    for i in range(L - 1, 0, -1):  # line 10: l = L -> 2
        if tau_b[i - 1] + t_b[i - 1] - tau_c[i] < a:  # line 11, eq. 38
            merge(i)  # line 12
            tau_c = calculate_comm_start()  # line 13
            m[i] = l_m  # line 14
    return MergePlan.from_merged_flags(m)


def optimal_plan(
    t_f: float, t_b: Sequence[float], sizes: Sequence[float], cost: CostModel
) -> MergePlan:
    """The exact minimum of ``iteration_time`` over all contiguous merge plans.

    Dynamic program over groups in backward order, O(L^2) time. Number the
    layers in backward order j = 0..L-1 (j = L-1-i) and let R_j be when the
    gradients of layer j are ready (eq. 6). A plan is a cut of 0..L-1 into
    consecutive groups; a group [s..e] starts at max(E, R_e), where E is when
    the previous group's all-reduce ended, and ends T_ar(sizes of s..e) later
    (eq. 7, 13, 14). Let F(e+1) be the earliest time at which the all-reduces
    of layers 0..e can all have ended, over plans that close a group at e:

        F(0) = -inf,  F(e+1) = min over s <= e of  max(F(s), R_e) + T_ar(S[s..e]).

    Correctness: given a plan's groups before s, everything after s depends
    on them only through E, the end of the last one, and every later end time
    is a composition of maps E -> max(E, R) + c, which are non-decreasing in
    E. So replacing the groups before s by ones that end earliest (time F(s))
    never makes the final end later; the optimum over plans whose last group
    is [s..L-1] is therefore max(F(s), R_{L-1}) + T_ar(S[s..L-1]), and F(L) is
    the minimum of eq. 24 (induction on e gives the same for every F(e+1)).
    The plan is rebuilt from the arg-mins; among equal times the smallest s
    (the largest group) wins.
    """
    _check_inputs(t_f, t_b, sizes)
    L = len(t_b)
    ready = _ready_times(t_f, t_b)
    backward_ready = [ready[L - 1 - j] for j in range(L)]
    backward_sizes = [sizes[L - 1 - j] for j in range(L)]
    best = [-math.inf] + [math.inf] * L  # best[e+1] = F(e+1)
    cut = [0] * (L + 1)
    for e in range(L):
        group_size = 0.0
        for s in range(e, -1, -1):
            group_size += backward_sizes[s]
            end = max(best[s], backward_ready[e]) + cost.time(group_size)
            if end <= best[e + 1]:
                best[e + 1] = end
                cut[e + 1] = s
    groups = []
    e = L
    while e > 0:
        s = cut[e]
        groups.append(tuple(L - 1 - j for j in range(s, e)))
        e = s
    return MergePlan(tuple(reversed(groups)))


def _all_plans(num_tensors: int) -> Iterator[MergePlan]:
    """All 2^(L-1) contiguous merge plans: each layer i >= 1 is l_n or l_m."""
    for flags in itertools.product((False, True), repeat=num_tensors - 1):
        yield MergePlan.from_merged_flags((False, *flags))


def brute_force_plan(
    t_f: float,
    t_b: Sequence[float],
    sizes: Sequence[float],
    cost: CostModel,
    *,
    max_tensors: int = 16,
) -> MergePlan:
    """The minimum of ``iteration_time`` by trying all 2^(L-1) plans (eq. 22).

    The paper counts |M| = 2^L, but layer 1 is never merged-gradient, so
    2^(L-1) plans are distinct. For checking ``optimal_plan`` on small L;
    refuses L > ``max_tensors``. Among equal times the first plan in
    enumeration order wins.
    """
    _check_inputs(t_f, t_b, sizes)
    if len(t_b) > max_tensors:
        raise ValueError(f"brute force over {len(t_b)} tensors exceeds max_tensors={max_tensors}")
    return min(_all_plans(len(t_b)), key=lambda plan: iteration_time(plan, t_f, t_b, sizes, cost))


# -- helpers for running a plan (the ``mgwfbp`` and ``synceasgd`` strategies) ----------------------


def group_layout(plan: MergePlan, sizes: Sequence[int]) -> list[tuple[tuple[int, int, int], ...]]:
    """Where each tensor lives in its group's flat buffer: per group (communication
    order) a tuple of (tensor, offset, size), in the group's own order; a group's
    buffer holds ``offset + size`` of its last entry elements."""
    if plan.num_tensors != len(sizes):
        raise ValueError(f"plan covers {plan.num_tensors} tensors but sizes has {len(sizes)}")
    layout = []
    for group in plan.groups:
        offset, slots = 0, []
        for tensor in group:
            slots.append((tensor, offset, sizes[tensor]))
            offset += sizes[tensor]
        layout.append(tuple(slots))
    return layout


def decode_merged(values: Sequence[float]) -> MergePlan:
    """The plan from a broadcast of m (eq. 22) encoded as one 0/1 value per tensor.

    Refuses anything but exact 0s and 1s: a sum that is not a one-hot plan
    means more than one rank contributed, and ranks must never guess a plan.
    """
    if any(v not in (0, 1) for v in values):
        raise ValueError(f"a broadcast merge plan holds only 0 and 1, got {list(values)!r}")
    return MergePlan.from_merged_flags([v == 1 for v in values])


def fit_sizes(total: int, *, count: int = 6, smallest: int = 256, largest: int = 1 << 22) -> list[int]:
    """Message sizes (in elements) for timing all-reduces to fit T(M) = a + b*M (Fig. 4).

    A geometric series from ``smallest`` to the whole model (``total``), capped
    at ``largest`` and never below 16 * ``smallest`` so the line has a slope to
    fit; ``count`` distinct sizes.
    """
    if count < 2 or smallest < 1:
        raise ValueError(f"fit_sizes needs count >= 2 and smallest >= 1, got {count}, {smallest}")
    top = max(16 * smallest, min(total, largest))
    ratio = (top / smallest) ** (1 / (count - 1))
    return [round(smallest * ratio**k) for k in range(count)]
