"""A job as ``synclab run`` and a container's coordinator prepare it, by one path so both hand
their nodes the same spec: the spec file and its overrides (:func:`synclab.config.load_spec`),
the network plan for this machine written into the spec, and the replay profile inline."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from synclab.config import Override, Spec, load_spec
from synclab.config.resolve import resolve_compute
from synclab.resources import spec_path
from synclab.roles.network import NetworkPlan, apply_to_spec, resolve_network


@dataclass(frozen=True)
class Job:
    spec: Spec            # what every node receives
    network: NetworkPlan
    notes: list[str]      # for the user: network and compute choices made here


def resolve_job(path: str | Path, overrides: Iterable[Override] = (), *,
                kernel_available: frozenset[str] | None = None, netns_unavailable: str | None | bool = False) -> Job:
    """:class:`~synclab.config.SpecError` names what is wrong. ``path`` is a spec file or the name of
    a packaged example (``quickstart``: :func:`synclab.resources.spec_path`). ``kernel_available`` and
    ``netns_unavailable`` go to :func:`~synclab.roles.network.resolve_network` (by default it
    probes this machine)."""
    spec = load_spec(spec_path(path), overrides)
    plan = resolve_network(spec, kernel_available=kernel_available, netns_unavailable=netns_unavailable)
    spec, compute_notes = resolve_compute(apply_to_spec(spec, plan))
    return Job(spec, plan, plan.notes + compute_notes)
