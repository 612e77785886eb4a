"""Every relative link in the hand-written and generated Markdown resolves: README.md, CONTRIBUTING.md,
CHANGELOG.md and every page under docs/ (plus benchmarks/ and studies/ indexes, which docs/ links to). A
link to a file must name an existing file or folder; a link to a heading of a Markdown page must name one of
that page's headings (GitHub's anchors). Reads files only."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
PAGES = sorted({REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md",
                *(REPO / "docs").rglob("*.md"), *(REPO / "benchmarks").glob("*.md"), *(REPO / "studies").glob("*.md")})
PAGES = [p for p in PAGES if p.exists()]

LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", flags=re.S | re.M)
CODE = re.compile(r"`[^`\n]*`")


def links(text: str) -> list[str]:
    """The targets of a page's Markdown links and images, outside code blocks and code spans."""
    return LINK.findall(CODE.sub("", FENCE.sub("", text)))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|<[^>]+>", "", heading.strip().lower())
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


@cache
def anchors(page: Path) -> set[str]:
    out, seen = set(), {}
    for line in FENCE.sub("", page.read_text()).splitlines():
        m = re.match(r"#{1,6}\s+(.*?)\s*#*\s*$", line)
        if m:
            s = slug(m.group(1))
            n = seen.get(s, 0)
            seen[s] = n + 1
            out.add(s if n == 0 else f"{s}-{n}")
    out |= set(re.findall(r'<a (?:name|id)="([^"]+)"', page.read_text()))
    return out


def test_the_link_finder_sees_links_and_skips_code():
    text = "see [a](x.md#b) and ![img](p.png)\n`[no](y.md)`\n```\n[no](z.md)\n```\n[t](https://e.org)\n"
    assert links(text) == ["x.md#b", "p.png", "https://e.org"]
    assert slug("`ps` — the KVStore baseline (P3 §4.1–4.2)") == "ps--the-kvstore-baseline-p3-4142"


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(REPO).as_posix() for p in PAGES])
def test_every_relative_link_resolves(page):
    broken = []
    for target in links(page.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target, flags=re.I):  # https:, mailto:, ...
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path).resolve() if path else page
        if not dest.exists():
            broken.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and dest.is_file() and anchor not in anchors(dest):
            broken.append(f"{target}: no heading with that anchor in {dest.relative_to(REPO)}")
    assert not broken, f"{page.relative_to(REPO)} has broken links:\n  " + "\n  ".join(broken)
