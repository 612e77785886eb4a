"""Every generated document is what the code and the checked-in records give today, and every checked-in
verdict is what today's judge makes of its points. A page edited by hand, a record judged by an older rule,
a command whose help changed without `synclab docs`: each fails here, naming the file and the command that
regenerates it. No process is started: the renderers read files and walk the code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import synclab.cli.docs  # noqa: F401  (registers docs/reference/cli.md beside the catalogue's pages)
from synclab.docsgen import Page, check, check_page, pages
from synclab.docsgen.readme import MarkerError, replace_block
from synclab.reproduce import rejudge
from synclab.reproduce.doc import RECORDS
from synclab.reproduce.schema import load_targets

REPO = Path(__file__).resolve().parents[3]
PAGES = pages(REPO)


@pytest.fixture(autouse=True)
def no_git(monkeypatch):
    """A verdict the judge moves is stamped with the checkout's ``git describe``; here that stamp (a process)
    is replaced by a label, so a stale verdict fails with its message and no process is started."""
    monkeypatch.setattr(rejudge, "judge_version", lambda: "this checkout")


@pytest.mark.parametrize("page", PAGES, ids=[p.path for p in PAGES])
def test_generated_file_is_current(page):
    stale = check_page(REPO, page)
    if stale is not None:
        pytest.fail(stale.message(), pytrace=False)


RECORD_DIRS = sorted(d for d in (REPO / RECORDS).iterdir() if (d / "verdict.json").exists())


@pytest.fixture(scope="module")
def targets():
    return {t.id: t for t in load_targets()}


@pytest.mark.parametrize("record", RECORD_DIRS, ids=[d.name for d in RECORD_DIRS])
def test_checked_in_verdict_is_what_the_judge_gives_today(record, targets):
    """Each claim's value and verdict judged again from ``points.csv`` with the judge on this checkout."""
    old = json.loads((record / "verdict.json").read_text())
    assert old["target"] in targets, f"{record}: its target {old['target']!r} is gone; remove the record"
    new = rejudge.rejudged(targets[old["target"]], record)
    where = (record / "verdict.json").relative_to(REPO)
    differ = [f"  claim {o['id']}: checked in {o['verdict']!r} ({o.get('synclab_value')}), "
              f"judged today {n['verdict']!r} ({n.get('synclab_value')})"
              for o, n in zip(old["claims"], new["claims"])
              if (o["verdict"], o.get("synclab_value")) != (n["verdict"], n.get("synclab_value"))]
    if len(old["claims"]) != len(new["claims"]):
        differ.append(f"  {len(old['claims'])} claims checked in, the target has {len(new['claims'])} now")
    if old["verdict"] != new["verdict"]:
        differ.append(f"  target verdict: checked in {old['verdict']!r}, judged today {new['verdict']!r}")
    if differ:
        pytest.fail(f"{where} no longer matches its points.csv under today's judge; run `synclab docs` to judge "
                    f"it again:\n" + "\n".join(differ), pytrace=False)


def test_a_hand_edited_number_is_reported_with_the_fixing_command(tmp_path):
    (tmp_path / "docs").mkdir()
    page = Page("docs/x.md", lambda root: "| a | 1.23 |\n")
    (tmp_path / "docs" / "x.md").write_text("| a | 1.24 |\n")
    stale = check_page(tmp_path, page)
    assert stale is not None
    assert "docs/x.md" in stale.message() and "`synclab docs`" in stale.message()
    assert "-| a | 1.24 |" in stale.reason and "+| a | 1.23 |" in stale.reason
    (tmp_path / "docs" / "x.md").write_text("| a | 1.23 |\n")
    assert check_page(tmp_path, page) is None


def test_readme_without_markers_is_a_clear_error():
    with pytest.raises(MarkerError, match="<!-- BEGIN GENERATED: strategies -->"):
        replace_block("# README\n", "strategies", "| table |")
    text = "a\n<!-- BEGIN GENERATED: strategies -->\nold\n<!-- END GENERATED: strategies -->\nb\n"
    assert replace_block(text, "strategies", "new") == ("a\n<!-- BEGIN GENERATED: strategies -->\nnew\n"
                                                        "<!-- END GENERATED: strategies -->\nb\n")


def test_a_page_that_cannot_render_is_reported_not_raised(tmp_path):
    """check() carries on past a page it cannot render and says why (here: a README without markers)."""
    (tmp_path / "README.md").write_text("# no markers\n")
    readme = next(p for p in PAGES if p.path == "README.md")
    from synclab import docsgen

    stale = [s for s in check(tmp_path) if s.page.path == readme.path]
    assert stale and "cannot render" in stale[0].reason and "BEGIN GENERATED" in stale[0].reason
    assert docsgen  # the registry stays usable afterwards
