"""Grafana's grid without Grafana: repeated panels tile like Grafana's, nothing overlaps."""

from __future__ import annotations

import json
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from synclab.dashboards.renderer.layout import GRID_COLUMNS, Cell, Repeat, arrange, clamp, height, repeat_cells

DASHBOARDS = Path(__file__).resolve().parents[3] / "grafana" / "dashboards"


def test_a_panel_too_far_right_moves_left():
    assert clamp(Cell(12, 8, 24, 6)) == Cell(0, 8, 24, 6)
    assert clamp(Cell(20, 0, 8, 3)) == Cell(16, 0, 8, 3)
    assert clamp(Cell(0, 0, 30, 3)) == Cell(0, 0, 24, 3)


def test_horizontal_repeat_wraps_after_max_per_row():
    cells, added = repeat_cells(Cell(0, 0, 12, 7), Repeat(5, "h", 2))
    assert cells == [Cell(0, 0, 12, 7), Cell(12, 0, 12, 7), Cell(0, 7, 12, 7), Cell(12, 7, 12, 7),
                     Cell(0, 14, 12, 7)]
    assert added == 14
    # few values share the row evenly; Grafana's default is at most 4 per row
    assert [c.w for c in repeat_cells(Cell(0, 0, 6, 4), Repeat(3))[0]] == [8, 8, 8]
    assert [c.x for c in repeat_cells(Cell(0, 0, 6, 4), Repeat(6))[0]] == [0, 6, 12, 18, 0, 6]


def test_vertical_repeat_stacks():
    cells, added = repeat_cells(Cell(4, 2, 10, 5), Repeat(3, "v"))
    assert cells == [Cell(4, 2, 10, 5), Cell(4, 7, 10, 5), Cell(4, 12, 10, 5)]
    assert added == 10


def test_network_dashboard_layout_with_five_nodes():
    board = json.loads((DASHBOARDS / "synclab-network.json").read_text())
    cells = [Cell(**{k: p["gridPos"][k] for k in "xywh"}) for p in board["panels"]]
    repeats = [Repeat(5, p.get("repeatDirection", "h"), p.get("maxPerRow")) if p.get("repeat") else None
               for p in board["panels"]]
    placed = arrange(cells, repeats)
    titles = [p["title"] for p in board["panels"]]
    by_title = dict(zip(titles, placed))
    # five copies, two to a row (maxPerRow), half the width each; the other panels follow below them
    assert by_title["tx / rx — $node"] == [Cell(x, y, 12, 7) for y in (0, 7, 14) for x in (0, 12)][:5]
    # (the grid floats panels up: "rx by node" fills the place beside the fifth copy)
    assert by_title["tx by node"] == [Cell(0, 21, 12, 8)] and by_title["rx by node"] == [Cell(12, 14, 12, 8)]
    assert by_title["egress utilisation"] == [Cell(0, 29, 24, 6)]
    assert all(0 <= c.x and c.x + c.w <= 24 for p in board["panels"] for c in [Cell(**{k: p["gridPos"][k] for k in "xywh"})])
    flat = [c for cs in placed for c in cs]
    assert not any(a.overlaps(b) for i, a in enumerate(flat) for b in flat[i + 1:])
    assert height(flat) == max(c.bottom for c in flat)


@settings(deadline=None, max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40), st.integers(1, 30), st.integers(1, 10),
                          st.one_of(st.none(), st.integers(1, 7))), min_size=1, max_size=12))
def test_arranged_panels_never_overlap_and_stay_on_the_grid(specs):
    cells = [Cell(x, y, w, h) for x, y, w, h, _ in specs]
    repeats = [Repeat(n, "h", 2) if n else None for *_, n in specs]
    placed = arrange(cells, repeats)
    flat = [c for cs in placed for c in cs]
    assert all(0 <= c.x and c.x + c.w <= GRID_COLUMNS and c.y >= 0 for c in flat)
    assert not any(a.overlaps(b) for i, a in enumerate(flat) for b in flat[i + 1:])
    assert [len(cs) for cs in placed] == [n or 1 for *_, n in specs]
