"""``synclab version``: print the SyncLab version."""

from __future__ import annotations

import typer


def version():
    """Print the SyncLab version."""
    from synclab import __version__

    typer.echo(__version__)
