"""Grafana dashboards of SyncLab, generated from code (grafana-foundation-sdk) and checked in.

    python -m synclab.dashboards grafana/dashboards           # write the JSON files
    python -m synclab.dashboards grafana/dashboards --check   # exit 1 if they are stale

:func:`render` returns file name -> JSON text; :mod:`synclab.dashboards.promql`
reads the queries back out of that JSON (the compose test runs each against a
live Prometheus). Only generating needs the SDK; reading the JSON does not.

This package is the build-time generator (``panels`` and one module per
dashboard); the runtime renderer that draws the dashboards without Grafana
(``synclab dashboards render``) is the subpackage :mod:`synclab.dashboards.renderer`.
"""

from __future__ import annotations

import json
from pathlib import Path

from synclab.fileio import write_atomic

# file name -> module with a build() returning the dashboard builder
DASHBOARDS = {
    "synclab-network.json": "synclab.dashboards.network",
    "synclab-training.json": "synclab.dashboards.training",
    "synclab-scheduler.json": "synclab.dashboards.scheduler",
}


def render() -> dict[str, str]:
    """Every dashboard as the exact text that is checked in (stable key order, trailing newline)."""
    import importlib

    from grafana_foundation_sdk.cog.encoder import JSONEncoder

    out = {}
    for name, module in DASHBOARDS.items():
        model = importlib.import_module(module).build().build()
        out[name] = json.dumps(model, cls=JSONEncoder, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in render().items():
        path = directory / name
        write_atomic(path, text)
        written.append(path)
    return written


def stale(directory: Path) -> list[str]:
    """Names of checked-in dashboards that differ from what the code generates (or are missing)."""
    return [name for name, text in render().items()
            if not (directory / name).is_file() or (directory / name).read_text() != text]
