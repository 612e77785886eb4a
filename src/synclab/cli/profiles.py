"""``synclab profiles``: list the link profiles and, with --check, this machine's backend."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer


def profiles(names: list[str] = typer.Argument(None, help="Profile names or YAML paths (default: all)."),
             profiles_dir: Optional[list[Path]] = typer.Option(None, "--profiles-dir",
                                                               help="Search these directories instead."),
             as_json: bool = typer.Option(False, "--json", help="Print JSON instead of a table."),
             check: bool = typer.Option(False, "--check", help="Also show the backend this machine would use for "
                                        "each profile (probes the kernel: netem, tbf/htb, or app when unprivileged).")):
    """List the link profiles (netem/profiles) with their values; --check adds the backend this machine would use."""
    from synclab.netem.cli import profiles_command

    raise typer.Exit(profiles_command(names or [], dirs=profiles_dir, as_json=as_json, check=check))
