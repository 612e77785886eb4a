"""``docs/reference/run-records.md`` is written by hand; it must name every file the code writes into a run
directory (found by scanning the package for ``run_dir / "NAME"``)."""

from __future__ import annotations

from pathlib import Path

import synclab
from synclab.docsgen.run_files import mentioned, run_files

REPO = Path(__file__).resolve().parents[3]


def test_every_file_a_run_writes_is_documented():
    text = (REPO / "docs" / "reference" / "run-records.md").read_text()
    found = run_files(Path(synclab.__file__).resolve().parent)
    assert {"summary.json", "iterations.csv", "spec.yaml"} <= set(found)  # the scan sees the run's core files
    missing = {n: m for n, m in found.items() if not mentioned(n, text)}
    assert not missing, ("docs/reference/run-records.md does not name these run files (written by): "
                         + "; ".join(f"{n} ({', '.join(m)})" for n, m in sorted(missing.items())))


def test_a_pattern_matches_the_files_it_stands_for():
    text = "| `traffic-<node>.csv` | x |\n| `logs/<node>.log`, `logs-attempt<k>/` | y |\n| `tls/` | z |"
    assert mentioned("traffic-{}.csv", text) and mentioned("traffic-worker0.csv", text)
    assert mentioned("logs-attempt{}", text) and mentioned("tls", text)
    assert not mentioned("summary.json", text)
