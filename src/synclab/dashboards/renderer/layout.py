"""Grafana's dashboard grid, for drawing a dashboard without Grafana.

A panel's ``gridPos`` is (x, y, w, h) on a grid 24 columns wide; rows are 30 px
high plus an 8 px gap. Grafana copies a panel repeated over a variable once per
value, side by side (``repeatDirection: h``, at most ``maxPerRow`` in a row) or
stacked (``v``), moves the panels below out of the way, and lets every panel
float up as far as it can without overlapping another (vertical compaction,
react-grid-layout). :func:`repeat_cells` and :func:`compact` do the same on
plain values.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

GRID_COLUMNS = 24
DEFAULT_MAX_PER_ROW = 4  # Grafana's default for horizontally repeated panels


@dataclass(frozen=True)
class Cell:
    """A panel's place on the grid, in grid units."""

    x: int
    y: int
    w: int
    h: int

    def overlaps(self, other: Cell) -> bool:
        return (self.x < other.x + other.w and other.x < self.x + self.w
                and self.y < other.y + other.h and other.y < self.y + self.h)

    @property
    def bottom(self) -> int:
        return self.y + self.h


def clamp(cell: Cell) -> Cell:
    """Keep a cell inside the 24 columns the way the grid does: too far right moves it left."""
    w = min(max(cell.w, 1), GRID_COLUMNS)
    x = min(max(cell.x, 0), GRID_COLUMNS - w)
    return Cell(x, max(cell.y, 0), w, max(cell.h, 1))


@dataclass(frozen=True)
class Repeat:
    """A panel repeated over a variable: one copy per value."""

    copies: int
    direction: str = "h"  # h: side by side, wrapping after max_per_row; v: stacked
    max_per_row: int | None = None


def repeat_cells(cell: Cell, repeat: Repeat) -> tuple[list[Cell], int]:
    """Where Grafana puts the copies of a panel at ``cell``, and how far the panels below move down."""
    if repeat.copies < 1:
        raise ValueError("a repeated panel has at least one copy")
    if repeat.direction == "v":
        return [replace(cell, y=cell.y + i * cell.h) for i in range(repeat.copies)], (repeat.copies - 1) * cell.h
    per_row = repeat.max_per_row or DEFAULT_MAX_PER_ROW
    w = max(GRID_COLUMNS // repeat.copies, GRID_COLUMNS // per_row)
    out, x, y = [], 0, cell.y
    for _ in range(repeat.copies):
        out.append(Cell(x, y, w, cell.h))
        x += w
        if x + w > GRID_COLUMNS:
            x, y = 0, y + cell.h
    return out, y - cell.y


def arrange(cells: list[Cell], repeats: list[Repeat | None]) -> list[list[Cell]]:
    """The cells of every panel (one per copy) after repeating and compacting, in panel order.

    The panels listed after a repeated one move down by the rows its copies added, unless
    they sit to its right in the same row (Grafana); then repeated copies are placed first and
    every other panel floats up as far as it can, pushed below any panel it would overlap.
    """
    if len(cells) != len(repeats):
        raise ValueError("one repeat setting (or None) per panel")
    cells = [clamp(c) for c in cells]
    out: list[list[Cell]] = [[c] for c in cells]
    for i, (cell, repeat) in enumerate(zip(cells, repeats)):
        if repeat is None:
            continue
        out[i], offset = repeat_cells(out[i][0], repeat)
        for j in range(i + 1, len(cells)):
            beside = out[j][0].y == cell.y and out[j][0].x >= cell.x + cell.w
            if offset > 0 and not beside:
                out[j] = [replace(c, y=c.y + offset) for c in out[j]]
    anchored = [(i, k) for i, r in enumerate(repeats) if r is not None for k in range(len(out[i]))]
    floating = sorted(((i, 0) for i, r in enumerate(repeats) if r is None),
                      key=lambda ik: (out[ik[0]][0].y, out[ik[0]][0].x, ik[0]))
    placed: list[Cell] = []
    for i, k in anchored + floating:
        c = out[i][k]
        while c.y > 0 and not any(replace(c, y=c.y - 1).overlaps(p) for p in placed):
            c = replace(c, y=c.y - 1)
        while (hit := next((p for p in placed if c.overlaps(p)), None)) is not None:
            c = replace(c, y=hit.bottom)
        out[i][k] = c
        placed.append(c)
    return out


def height(cells: list[Cell]) -> int:
    """Grid rows the dashboard needs."""
    return max((c.bottom for c in cells), default=0)
