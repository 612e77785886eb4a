"""The digest of the source files the SyncLab node image is built from.

``services/Dockerfile`` copies a fixed set of paths (its ``.dockerignore`` lists them); the image
carries their digest in the label ``io.synclab.source`` (build argument ``SOURCE_DIGEST``, set by
``scripts/docker/build.sh``). ``synclab run`` with ``network.isolation: docker`` compares the label
with the checkout's digest and rebuilds an image whose code is not the checkout's, so a container
never runs stale code after an edit.

Standard library only: ``build.sh`` runs this file with the system ``python3`` before any venv
exists (``python3 src/synclab/roles/image_source.py`` prints the digest).
"""

from __future__ import annotations

import hashlib
import os
import sys
from pathlib import Path

SOURCE_LABEL = "io.synclab.source"
# What services/Dockerfile copies (services/Dockerfile.dockerignore), wheels aside: a torch wheel
# changes the image only through TORCH_SPEC, not through SyncLab's code.
# The profiles, examples and targets are package data under src/ (the checkout's links point there).
IMAGE_SOURCES = ("pyproject.toml", "README.md", "src", "plugins", "services/entrypoint.py", "services/specs",
                 "services/Dockerfile")
_SKIPPED_PARTS = {"__pycache__"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


def _files(root: Path) -> list[Path]:
    found = []
    for entry in IMAGE_SOURCES:
        path = root / entry
        candidates = [path] if path.is_file() else sorted(p for p in path.rglob("*") if p.is_file())
        for p in candidates:
            rel = p.relative_to(root)
            if _SKIPPED_PARTS & set(rel.parts) or p.name.endswith(_SKIPPED_SUFFIXES) or \
                    any(part.endswith(".egg-info") for part in rel.parts):
                continue
            found.append(p)
    return found


def source_digest(root: Path) -> str:
    """sha256 over (relative path, content) of every image source file under ``root``, in path order, and
    the strategy plugins the image installs (``SYNCLAB_PLUGINS``, the Dockerfile's build argument), if any."""
    h = hashlib.sha256()
    plugins = os.environ.get("SYNCLAB_PLUGINS", "").split()
    if plugins:
        h.update(("plugins:" + " ".join(plugins)).encode())
    for p in sorted(_files(root), key=lambda p: p.relative_to(root).as_posix()):
        rel = p.relative_to(root).as_posix().encode()
        data = p.read_bytes()
        h.update(len(rel).to_bytes(4, "big") + rel + len(data).to_bytes(8, "big") + data)
    return h.hexdigest()[:32]


if __name__ == "__main__":
    print(source_digest(Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parents[3]))
