"""The data files SyncLab ships inside its package, found through :mod:`importlib.resources`.

Four kinds of data travel in the wheel, each in one directory of the package (the checkout's
top-level ``examples``, ``profiles`` and ``netem/profiles`` are links to these, so there is one copy):

=====================  ==============================  ======================================
what                   in the package                  a user's own directory, searched first
=====================  ==============================  ======================================
example specs          ``synclab/examples/*.yaml``     ``synclab run PATH`` takes any file
model profiles         ``synclab/profiles/``           ``$SYNCLAB_MODEL_PROFILES_DIR``
link profiles          ``synclab/netem/profiles/``     ``$SYNCLAB_PROFILES`` (``$SYNCLAB_PROFILES_DIR``)
reproduction targets   ``synclab/reproduce/targets/``  ``synclab reproduce --targets DIR``
=====================  ==============================  ======================================

Paths inside the data are written from the package's root (a target's ``spec: examples/quickstart.yaml``,
``compute.profile=profiles/alexnet-b128-cpu.json``, ``profiles/calibration.yaml``): :func:`locate` reads
such a path from the working directory when it is there, else from the package. Standard library only.
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path

EXAMPLE_SUFFIXES = (".yaml", ".yml")


def package_root() -> Path:
    """The directory of the installed ``synclab`` package (the root of every packaged path)."""
    return Path(str(resources.files("synclab")))


def packaged(relative: str | Path) -> Path:
    """``relative`` inside the package (it may not exist)."""
    return package_root() / Path(relative)


def locate(path: str | Path, base: Path | None = None) -> Path:
    """A data path as a user wrote it: absolute as is; relative from ``base`` (default: the working
    directory) when it exists there, else from the package root when the package ships it, else as given
    (so the caller's "does not exist" names what the user wrote)."""
    p = Path(path)
    if p.is_absolute():
        return p
    here = (base or Path.cwd()) / p
    if here.exists():
        return here
    shipped = packaged(p)
    return shipped if shipped.exists() else p


def examples_dir() -> Path:
    return packaged("examples")


def examples() -> dict[str, Path]:
    """The packaged example specs by name (the file's stem)."""
    d = examples_dir()
    return {p.stem: p for p in sorted(d.iterdir()) if p.suffix in EXAMPLE_SUFFIXES and p.is_file()}


def example_summary(path: Path) -> str:
    """The first comment line of an example spec: what it runs."""
    for line in path.read_text().splitlines():
        if line.startswith("#"):
            return line.lstrip("#").strip()
        if line.strip():
            break
    return ""


def spec_path(name_or_path: str | Path) -> Path:
    """What ``synclab run`` reads: an existing file, else a packaged example by name (``quickstart``)."""
    p = Path(name_or_path)
    if p.is_file():
        return p
    found = examples()
    if p.suffix not in EXAMPLE_SUFFIXES and len(p.parts) == 1 and str(p) in found:
        return found[str(p)]
    return locate(p)


def model_profiles_dir() -> Path:
    return packaged("profiles")


def link_profiles_dir() -> Path:
    return packaged(Path("netem") / "profiles")


def targets_dir() -> Path:
    return packaged(Path("reproduce") / "targets")


def checkout(start: Path | None = None) -> Path | None:
    """The SyncLab checkout ``start`` (default: the working directory) is in: the nearest directory with
    ``pyproject.toml`` and ``docs/``; None outside one (an installed wheel run from elsewhere). Commands that
    write checked-in documents or records need one."""
    here = (start or Path.cwd()).resolve()
    for d in [here, *here.parents]:
        if (d / "pyproject.toml").is_file() and (d / "docs").is_dir():
            return d
    return None
