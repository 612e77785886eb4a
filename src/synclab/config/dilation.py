"""The time dilation D a job runs at when its spec does not set ``run.dilation``: the documented rule.

Rule (docs/explanation, "Time dilation"; the reproduction targets' conventions): the smallest power of two
D such that the emulated traffic that may flow at the same time — worst case every node that owns a link
sending at the link rate at once — divided by D stays at or below :data:`HOST_BUDGET_BPS`, what Python
gRPC on the 2-core development host moves with room (gRPC measured at 2.3-2.9 Gbit/s there). Below that
budget D = 1.

Only replayed compute can be dilated (compute times x D, link rates / D, records divided back); real
PyTorch compute runs at D = 1, and the summary's ``host_cpu`` says when the host bounded the figures.
An explicit ``run.dilation`` (in the file or an override) always wins.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from synclab.config.spec import Spec

# What the host may be asked to move at once (CHANGELOG.md "Link accuracy": gRPC ~2.3-2.9 Gbit/s on 2 cores).
HOST_BUDGET_BPS = 1.5e9
MAX_DILATION = 1000      # RunSpec.dilation's bound


def dilation_for(concurrent_bps: float, budget_bps: float = HOST_BUDGET_BPS) -> int:
    """Smallest power of two D with concurrent_bps / D <= budget_bps (1 when already below)."""
    if concurrent_bps <= 0:
        raise ValueError(f"concurrent traffic must be > 0, got {concurrent_bps}")
    d = 1
    while concurrent_bps / d > budget_bps:
        d *= 2
    if d > MAX_DILATION:
        raise ValueError(f"{concurrent_bps / 1e9:.1f} Gbit/s needs D={d} > {MAX_DILATION}: too big for this host")
    return d


def links_of(spec: Spec) -> tuple[int, float | None]:
    """(nodes that own a link, link rate in bit/s) of a loaded spec: the dilation rule's inputs."""
    link = spec.network.link_profile()
    rate = None if link is None else link.rate_bps
    nodes = [f"worker{r}" for r in range(spec.n_workers)] + [f"ps{i}" for i in range(spec.n_ps)]
    return len({spec.machine_of(n) for n in nodes}), rate  # co-located shards share their worker's link


@dataclass(frozen=True)
class DilationChoice:
    """The D a job runs at, where it came from and why, in a sentence for the user."""

    dilation: float
    source: Literal["spec", "rule", "real compute", "unshaped"]
    reason: str

    def describe(self) -> str:
        return f"dilation D = {self.dilation:g} ({self.source}): {self.reason}"


def dilation_explicit(spec: Spec) -> bool:
    """Whether the spec file or an override set ``run.dilation``."""
    return "dilation" in spec.run.model_fields_set


def choose_dilation(spec: Spec, budget_bps: float = HOST_BUDGET_BPS) -> DilationChoice:
    """D for ``spec``: its own ``run.dilation`` when set; otherwise 1 for real compute and unshaped links, and
    :func:`dilation_for` of every link-owning node at the link rate for replayed compute.
    ValueError when the rule's D exceeds :data:`MAX_DILATION`."""
    if dilation_explicit(spec):
        return DilationChoice(spec.run.dilation, "spec", "run.dilation is set")
    if spec.compute.mode != "replay":
        return DilationChoice(1.0, "real compute", "real compute cannot be slowed down exactly, so it runs "
                                                   "undilated; the summary's host_cpu says when the host bounded "
                                                   "the figures")
    nodes, rate = links_of(spec)
    if rate is None:
        return DilationChoice(1.0, "unshaped", "the links are not shaped (no network.rate or profile): nothing "
                                               "to dilate")
    d = dilation_for(nodes * rate, budget_bps)
    total = nodes * rate
    if d == 1:
        why = (f"{nodes} link(s) x {rate / 1e9:g} Gbit/s = {total / 1e9:g} Gbit/s at once fits the host budget "
               f"of {budget_bps / 1e9:g} Gbit/s")
    else:
        why = (f"{nodes} link(s) x {rate / 1e9:g} Gbit/s = {total / 1e9:g} Gbit/s may flow at once, more than "
               f"the host budget of {budget_bps / 1e9:g} Gbit/s; D = {d} (the smallest power of two) brings it "
               f"to {total / d / 1e9:g} Gbit/s: compute x{d}, links /{d}, records divided back. "
               f"Set run.dilation to override")
    return DilationChoice(float(d), "rule", why)
