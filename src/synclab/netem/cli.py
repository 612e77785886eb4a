"""Command logic for link profiles and netns leftovers, as plain functions returning exit codes.

``synclab profiles [--check]`` and ``synclab cleanup`` (``synclab.cli``) call
:func:`profiles_command` and :func:`cleanup_command`. Bad profiles exit 2 with a
message that names the file and field.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from synclab.linkprofile import LinkProfile, ProfileError
from synclab.netem.profile import human, list_profiles, load_profile
from synclab.netem.tc import choose_backend, detect_backends, has_net_admin


def profile_rows(profiles: Sequence[LinkProfile], *, available: frozenset[str] | None = None,
                 privileged: bool = False) -> list[dict[str, Any]]:
    """One row per profile in human units; with ``available`` also the backend this machine would use."""
    rows = []
    for p in profiles:
        row = human(p)
        if available is not None:
            choice = choose_backend(p, available, privileged)
            row["backend"] = choice.backend
            row["left_to_transport"] = sorted(choice.left_to_app)
        rows.append(row)
    return rows


def profiles_table(rows: Sequence[dict[str, Any]]) -> Table:
    """A rich table of :func:`profile_rows`."""
    cols = ["name", "rate", "burst", "queue", "delay", "jitter", "loss", "direction"]
    if rows and "backend" in rows[0]:
        cols += ["backend", "left_to_transport"]
    cols += ["roles", "description"]
    table = Table(title="link profiles")
    for c in cols:
        table.add_column(c.replace("_", " "), overflow="fold")
    for r in rows:
        cells = []
        for c in cols:
            v = r.get(c, "")
            if isinstance(v, dict):
                v = "; ".join(f"{k}: " + ", ".join(f"{kk}={vv}" for kk, vv in o.items()) for k, o in v.items())
            elif isinstance(v, list):
                v = ", ".join(v) or "-"
            cells.append(str(v))
        table.add_row(*cells)
    return table


def profiles_command(names: Sequence[str] = (), *, dirs: Sequence[Path] | None = None, as_json: bool = False,
                     check: bool = False, console: Console | None = None) -> int:
    """List profiles (all, or ``names`` / paths) with their values; returns the exit code (2: bad profile)."""
    console = console or Console()
    try:
        profiles = [load_profile(n, dirs) for n in names] if names else list_profiles(dirs)
    except ProfileError as e:
        Console(stderr=True).print(f"[bold red]error:[/] {e}")
        return 2
    available, privileged = None, False
    if check:
        privileged = has_net_admin()
        available = detect_backends() if privileged else frozenset()
    rows = profile_rows(profiles, available=available, privileged=privileged)
    if as_json:
        console.print_json(json.dumps(rows))
    else:
        console.print(profiles_table(rows))
    return 0


def cleanup_command(prefix: str, *, force: bool = False, console: Console | None = None) -> int:
    """Remove netns leftovers of crashed runs; returns the exit code (2: cannot run here)."""
    from synclab.netem.netns import NetnsUnavailable, cleanup_leftovers

    console = console or Console()
    try:
        removed = cleanup_leftovers(prefix, force=force)
    except NetnsUnavailable as e:
        Console(stderr=True).print(f"[bold red]error:[/] {e}")
        return 2
    for r in removed:
        console.print(f"removed {r}")
    console.print(f"{len(removed)} leftover(s) removed" if removed else "nothing to clean up")
    return 0
