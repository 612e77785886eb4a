"""``synclab tls init``: mutual TLS material for one cluster's gRPC connections."""

from __future__ import annotations

from pathlib import Path

import typer

from synclab.cli._common import console, fail


def tls_init(directory: Path = typer.Argument(..., help="Where to write ca.pem, node.pem and node-key.pem."),
             days: int = typer.Option(30, "--days", min=1, help="How long the certificates are valid."),
             force: bool = typer.Option(False, "--force", help="Replace files already there.")):
    """Make a CA for one cluster and a node certificate signed by it; copy DIR to every host and start every
    SyncLab process with SYNCLAB_TLS_DIR=DIR (the CA's key is not kept: no one can add nodes later)."""
    from synclab.wire.tls import ENV, FILES, make_cluster_ca

    if directory.exists() and not directory.is_dir():
        fail(f"{directory} is a file, not a folder")
    there = [n for n in FILES.values() if (directory / n).exists()]
    if there and not force:
        fail(f"{directory} already holds {', '.join(there)}; --force replaces them (and every host needs the new ones)")
    try:
        make_cluster_ca(directory, days=days)  # all three files or none (synclab.fileio.write_group)
    except OSError as e:
        fail(f"cannot write the TLS files to {directory}: {e.strerror or e}; none was written", 1)
    console.print(f"wrote {', '.join(FILES.values())} to {directory} (valid {days} days); "
                  f"start every node with {ENV}={directory.resolve()}")
