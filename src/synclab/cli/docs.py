"""``synclab docs``: regenerate every generated document (:mod:`synclab.docsgen`), or, with ``--check``,
render them in memory and list each one that is stale with the command that fixes it.

This module also registers the command-line reference (``docs/reference/cli.md``): it is the one place that
can hand the renderer the whole command tree without the docs package importing the CLI.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from synclab.docsgen import register

CLI_PAGE = "docs/reference/cli.md"


def _cli_page(root: Path) -> str:
    import typer.main

    from synclab.cli import app
    from synclab.docsgen.cli_ref import render

    return render(typer.main.get_command(app))


register(CLI_PAGE, _cli_page)


def docs(check: bool = typer.Option(False, "--check", help="Write nothing: render every page in memory and exit "
                                    "1 listing each stale one and the command that regenerates it."),
         root: Optional[Path] = typer.Option(None, "--root", help="The checkout whose documents to write "
                                             "(default: the one the working directory is in).")):
    """Regenerate the generated documents: docs/reference/, docs/results/, the checked-in verdicts and the
    README's generated blocks."""
    from rich.markup import escape

    from synclab.cli._common import console, fail
    from synclab.docsgen import check as check_all
    from synclab.docsgen import repo_root, write

    try:
        where = repo_root(root)
    except FileNotFoundError as e:
        fail(str(e))
    try:
        if check:
            stale = check_all(where)
            for s in stale:
                console.print(f"[bold red]stale:[/] {escape(s.message())}", highlight=False, soft_wrap=True)
            if stale:
                fail(f"{len(stale)} generated file(s) stale; `synclab docs` regenerates them", 1)
            typer.echo("every generated document is current")
            return
        done = write(where)
    except (LookupError, ValueError, OSError) as e:  # a record or marker the renderers cannot use
        fail(f"cannot render the documents: {e}", 1)
    for page, changed in done:
        if changed:
            typer.echo(f"wrote {page.path}")
    typer.echo(f"{sum(c for _, c in done)} of {len(done)} generated file(s) changed")
