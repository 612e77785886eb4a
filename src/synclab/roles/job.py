"""A job as ``synclab run`` and a container's coordinator prepare it, by one path so both hand
their nodes the same spec: the spec file and its overrides (:func:`synclab.config.load_spec`),
the time dilation (:func:`synclab.config.dilation.choose_dilation`, where the spec leaves it open),
the network plan for this machine written into the spec, and the replay profile inline."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from synclab.config import Override, Spec, SpecError, load_spec
from synclab.config.dilation import DilationChoice, choose_dilation
from synclab.config.resolve import resolve_compute
from synclab.resources import spec_path
from synclab.roles.network import NetworkPlan, apply_to_spec, resolve_network


@dataclass(frozen=True)
class Job:
    spec: Spec            # what every node receives
    network: NetworkPlan
    notes: list[str]      # for the user: network and compute choices made here
    dilation: DilationChoice  # the D chosen for the job, and why (spec.run.dilation unless auto_dilation=False)


def resolve_job(path: str | Path, overrides: Iterable[Override] = (), *,
                kernel_available: frozenset[str] | None = None, netns_unavailable: str | None | bool = False,
                auto_dilation: bool = True) -> Job:
    """:class:`~synclab.config.SpecError` names what is wrong. ``path`` is a spec file or the name of
    a packaged example (``quickstart``: :func:`synclab.resources.spec_path`). ``kernel_available`` and
    ``netns_unavailable`` go to :func:`~synclab.roles.network.resolve_network` (by default it
    probes this machine). ``auto_dilation``: where the spec does not set ``run.dilation``, run at the D
    :func:`~synclab.config.dilation.choose_dilation` picks (the spec is loaded again with it, so what
    depends on D, such as an ``auto`` chunk size, follows); False leaves the spec's D, and ``Job.dilation``
    is the rule's advice only."""
    overrides = list(overrides)
    spec = load_spec(spec_path(path), overrides)
    try:
        choice = choose_dilation(spec)
    except ValueError as e:
        raise SpecError(f"run.dilation: {e}; set run.dilation to run it anyway") from None
    if auto_dilation and choice.dilation != spec.run.dilation:
        spec = load_spec(spec_path(path), [*overrides, ("run.dilation", choice.dilation)])
    plan = resolve_network(spec, kernel_available=kernel_available, netns_unavailable=netns_unavailable)
    spec, compute_notes = resolve_compute(apply_to_spec(spec, plan))
    return Job(spec, plan, plan.notes + compute_notes, choice)


def cluster_for(job: Job, run_dir: Path):
    """The cluster that runs ``job`` into ``run_dir``: containers under ``network.isolation: docker``, else local
    processes (in namespaces or on loopback). Started with ``start()``, run with
    :func:`synclab.roles.launcher.supervise`, under the host lock (:func:`synclab.hostlock.hold`)."""
    if job.network.isolation == "docker":
        from synclab.roles.docker_cluster import DockerCluster

        return DockerCluster(job.spec, run_dir)
    from synclab.roles.launcher import LocalCluster

    return LocalCluster(job.spec, run_dir, isolation=job.network.isolation)
