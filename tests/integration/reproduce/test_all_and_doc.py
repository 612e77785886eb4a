"""``synclab reproduce --all`` runs every target and writes the doc; the doc's records are checked in, so
``--doc`` on a clone without ``runs/`` writes the same doc. Two cheap real targets (the simulator and
Stanza's model), copied into a directory of one's own targets (``--targets DIR --only-own``) in a
directory that stands for a checkout (pyproject.toml, docs/), run from the CLI."""

from __future__ import annotations

import shutil
import subprocess
import sys

from support.cluster import REPO
from synclab.resources import targets_dir

KEEP = ("mgwfbp-fig6-8-sim", "stanza-fig8")


def _synclab(root, *args):
    return subprocess.run([sys.executable, "-m", "synclab", "reproduce", *args], cwd=root, capture_output=True,
                          text=True, timeout=600)


def test_all_then_doc_on_a_clone_without_runs(tmp_path):
    own = tmp_path / "targets"
    own.mkdir()
    for t in KEEP:
        shutil.copy(targets_dir() / f"{t}.yaml", own)
    (tmp_path / "pyproject.toml").write_text("")
    (tmp_path / "docs").mkdir()
    r = _synclab(tmp_path, "--all", "--quick", "--points", "2", "--targets", str(own), "--only-own")
    assert r.returncode == 0, r.stdout + r.stderr
    doc = (tmp_path / "docs" / "results" / "reproduction.md").read_text()
    for t in KEEP:
        record = tmp_path / "docs" / "reproduction" / f"{t}-quick"
        assert {"verdict.json", "points.csv"} <= {p.name for p in record.iterdir()}
        assert f"| [`{t}`]" in doc and f"](../reproduction/{t}-quick/" in doc
    assert "Targets defined but without a verdict" not in doc

    shutil.rmtree(tmp_path / "runs")
    (tmp_path / "docs" / "results" / "reproduction.md").unlink()
    r = _synclab(tmp_path, "--doc", "--targets", str(own), "--only-own")
    assert r.returncode == 0, r.stdout + r.stderr
    assert (tmp_path / "docs" / "results" / "reproduction.md").read_text() == doc


def test_no_target_and_no_mode_is_an_error(tmp_path):
    r = _synclab(REPO)
    assert r.returncode == 2 and "--all" in r.stderr
