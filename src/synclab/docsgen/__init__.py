"""Generated documents: one registry of (path -> render function), written by ``synclab docs``.

Every document SyncLab generates from its code or from checked-in records is a :class:`Page`: a path relative
to the repository root, a function ``render(root) -> str`` that returns the file's whole text from what is
checked in under ``root`` (pure: it reads files, writes nothing, starts no process), and the command that
rewrites it. ``synclab docs`` writes every page in registration order (a page may read what an earlier one
wrote: verdicts before the reproduction page, pages before the README's blocks); ``synclab docs --check`` and
``tests/unit/docsgen/test_fresh.py`` render every page in memory and report each one whose file differs.

To add a page, write its render function in the package that owns the data (any layer: a render function
imports downwards only) and register it with one line in :mod:`synclab.docsgen.catalog`::

    register("docs/results/validation.md", validation.render, command="synclab validate --doc")

``command`` is what a stale page's message tells the reader to run (default ``synclab docs``; a page whose
render function ``synclab docs`` also calls keeps the default). A set of files that grows with the records
(one ``verdict.json`` per checked-in run) registers a provider instead: ``register_many(fn)``, where
``fn(root)`` returns the pages it finds.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

DEFAULT_COMMAND = "synclab docs"


@dataclass(frozen=True)
class Page:
    """One generated file: ``path`` (relative to the repository root), its renderer, the command that fixes it."""

    path: str
    render: Callable[[Path], str]
    command: str = DEFAULT_COMMAND


@dataclass(frozen=True)
class Stale:
    """A page whose file on disk is not what its renderer gives now."""

    page: Page
    reason: str  # "missing", or the first differing lines as a unified diff

    def message(self) -> str:
        return f"{self.page.path} is stale ({self.reason}); run `{self.page.command}` to regenerate it"


_ENTRIES: list[Page | Callable[[Path], list[Page]]] = []


def register(path: str, render: Callable[[Path], str], *, command: str = DEFAULT_COMMAND) -> Page:
    """Register one generated file; a second registration of the same path is refused."""
    if any(isinstance(e, Page) and e.path == path for e in _ENTRIES):
        raise ValueError(f"generated page {path!r} is registered twice")
    page = Page(path, render, command)
    _ENTRIES.append(page)
    return page


def register_many(provider: Callable[[Path], list[Page]]) -> None:
    """Register a provider: ``provider(root)`` lists pages found under ``root`` (e.g. one per record)."""
    _ENTRIES.append(provider)


def pages(root: Path) -> list[Page]:
    """Every registered page under ``root``, in registration order."""
    import synclab.docsgen.catalog  # noqa: F401  (registers the built-in pages, once)

    out: list[Page] = []
    for entry in _ENTRIES:
        out.extend([entry] if isinstance(entry, Page) else entry(root))
    return out


def _diff(old: str, new: str, path: str, lines: int = 12) -> str:
    d = list(difflib.unified_diff(old.splitlines(), new.splitlines(), f"{path} (on disk)", f"{path} (rendered)",
                                  n=0, lineterm=""))
    shown = d[:lines] + ([f"... {len(d) - lines} more diff lines"] if len(d) > lines else [])
    return "differs:\n    " + "\n    ".join(shown)


def check_page(root: Path, page: Page) -> Stale | None:
    """Render ``page`` in memory and compare it with its file under ``root``."""
    path = root / page.path
    new = page.render(root)
    if not path.exists():
        return Stale(page, "missing")
    old = path.read_text()
    return None if old == new else Stale(page, _diff(old, new, page.path))


def check(root: Path) -> list[Stale]:
    """Every stale page under ``root`` (writes nothing); a page that cannot be rendered (a record whose target
    is gone, a README without its markers) is reported as stale with the reason."""
    out = []
    for page in pages(root):
        try:
            stale = check_page(root, page)
        except (LookupError, ValueError, OSError) as e:
            stale = Stale(page, f"cannot render: {e}")
        if stale is not None:
            out.append(stale)
    return out


def write(root: Path) -> list[tuple[Page, bool]]:
    """Render and write every page in order; (page, whether its file changed) for each."""
    done = []
    for page in pages(root):
        path = root / page.path
        text = page.render(root)
        changed = not path.exists() or path.read_text() != text
        if changed:
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_name(path.name + ".tmp")
            tmp.write_text(text)
            tmp.replace(path)  # never a half-written page
        done.append((page, changed))
    return done


def repo_root(start: Path | None = None) -> Path:
    """The checkout the documents belong to: the nearest directory at or above ``start`` (default the working
    directory) holding ``pyproject.toml`` and ``src/synclab``."""
    start = (start or Path.cwd()).resolve()
    for d in [start, *start.parents]:
        if (d / "pyproject.toml").is_file() and (d / "src" / "synclab").is_dir():
            return d
    raise FileNotFoundError(f"no SyncLab checkout (pyproject.toml and src/synclab) at or above {start}")
