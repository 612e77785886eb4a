"""Import a script that is not a package module (a benchmark, the container entrypoint) so its functions can be
unit-tested."""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]


def load_script(path: Path | str, name: str | None = None) -> ModuleType:
    """A fresh module made from ``path`` (relative to the repository unless absolute), named ``name`` or the
    file's stem; every call executes the file again, so module-level state is not shared between callers."""
    path = REPO / path
    spec = importlib.util.spec_from_file_location(name or path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
