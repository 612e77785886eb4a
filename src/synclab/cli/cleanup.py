"""``synclab cleanup``: remove what a crashed run left behind (namespaces, links, containers)."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console

from synclab.cli._common import fail


def cleanup(force: bool = typer.Option(False, "--force", help="Also remove clusters whose owner still runs."),
            docker: bool = typer.Option(False, "--docker", help="Containers and networks of `synclab run` with "
                                        "network.isolation=docker instead (label io.synclab.job)."),
            job: Optional[str] = typer.Option(None, "--job", help="With --docker: only this job (`docker_job` in "
                                              "the run's control.json), whether its launcher runs or not.")):
    """Remove namespaces, veths, bridges, ifbs and rules left by a crashed run (--docker: its containers and
    network); what a launcher that still runs owns is kept unless --force."""
    if docker:
        from synclab.roles.docker_cluster import DockerUnavailable, clean, engine

        try:
            removed = clean(engine(), job, force=force)
        except DockerUnavailable as e:
            fail(str(e))
        for what in removed:
            Console().print(f"removed {what}")
        Console().print(f"{len(removed)} leftover(s) removed" if removed else "nothing to clean up")
        return
    if job:
        fail("--job goes with --docker")
    from synclab.netem.cli import cleanup_command
    from synclab.netem.netns import PREFIX_BASE

    raise typer.Exit(cleanup_command(PREFIX_BASE, force=force))
