"""``synclab examples``: the example specs shipped in the package (``synclab run NAME`` runs one)."""

from __future__ import annotations

from typing import Optional

import typer
from rich.console import Console


def examples(name: Optional[str] = typer.Argument(None, help="Print this example's YAML (to copy and edit).")):
    """List the packaged example specs, or print one; run one with `synclab run NAME`."""
    from synclab.resources import example_summary
    from synclab.resources import examples as found

    shipped = found()
    if name is not None:
        if name not in shipped:
            Console(stderr=True).print(f"[bold red]error:[/] no example {name!r}; have: {', '.join(shipped)}")
            raise typer.Exit(2)
        typer.echo(shipped[name].read_text(), nl=False)
        return
    width = max(map(len, shipped), default=0)
    for n, path in shipped.items():
        typer.echo(f"{n:{width}s}  {example_summary(path)}")
