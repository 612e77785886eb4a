"""The generated results: each checked-in reproduction record's ``verdict.json`` judged again from its
points (:mod:`synclab.reproduce.rejudge`), and ``docs/results/reproduction.md`` built from those records."""

from __future__ import annotations

import json
from pathlib import Path

from synclab.docsgen import Page
from synclab.reproduce.doc import DOC, RECORDS, documented, render_text
from synclab.reproduce.schema import load_targets


def verdict_pages(root: Path) -> list[Page]:
    """One page per checked-in record: its ``verdict.json`` as today's judge gives it from ``points.csv``."""
    from synclab.reproduce.rejudge import rejudged
    from synclab.reproduce.runner import verdict_text

    targets = {t.id: t for t in load_targets()}  # read once for every record

    def page(record: Path) -> Page:
        def render(root: Path) -> str:
            target_id = json.loads((record / "verdict.json").read_text())["target"]
            if target_id not in targets:
                raise LookupError(f"{record}: target {target_id!r} is not defined any more; remove the record")
            return verdict_text(rejudged(targets[target_id], record))

        return Page((record / "verdict.json").relative_to(root).as_posix(), render)

    records = root / RECORDS
    return [page(d) for d in sorted(records.iterdir()) if (d / "verdict.json").exists()] if records.is_dir() else []


def reproduction_page(root: Path) -> str:
    """``docs/results/reproduction.md`` from the checked-in records (what ``synclab reproduce --doc`` writes
    when no local run is newer than a record)."""
    found, missing = documented(root, load_targets())
    return render_text(found, root / DOC, missing=missing)

