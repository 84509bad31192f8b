"""Text rendering of a Sudoku grid.

Each cell is three characters: ``[5]`` a given (fixed) digit, `` 5 `` a digit the agent
placed, `` . `` an empty cell.  Rows and columns are labelled from 1; ``|`` and a
``-``/``+`` line separate the boxes.  Example (4x4, givens 1 and 3, one placed 4)::

        1   2     3   4
     1 [1]  .  | [3]  4
     2  .   .  |  .   .
       --------+--------
     3  .   .  |  .   .
     4  .   .  |  .   .
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from operator import getitem

from .grid import geometry


def _cell(value: int, given: bool) -> str:
    if not value:
        return " . "
    return f"[{value}]" if given else f" {value} "


@cache
def _layout(n: int) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """A ``str.format`` template with one slot per cell, and per cell its tokens indexed
    by ``v`` for a digit ``v`` the agent placed (``0``: empty) and by ``n + 1 + v`` for a
    given ``v`` (the last column's without their trailing space)."""
    b = geometry(n).box
    tokens = tuple(_cell(v, False) for v in range(n + 1)) + tuple(
        _cell(v, True) for v in range(n + 1)
    )
    last = tuple(t.rstrip() for t in tokens)

    def line(label: str, cells: list[str], sep: str) -> str:
        boxes = [" ".join(cells[k : k + b]) for k in range(0, n, b)]
        return (f"{label:>2} " + sep.join(boxes)).rstrip()

    header = line("", [f" {c} " for c in range(1, n + 1)], "   ")
    rule = "   " + "-+-".join(["-" * (4 * b - 1)] * b)
    rows = [header]
    for r in range(n):
        if r and r % b == 0:
            rows.append(rule)
        rows.append(line(str(r + 1), ["{}"] * n, " | "))
    return "\n".join(rows), tuple(last if i % n == n - 1 else tokens for i in range(n * n))


def render_grid(grid: Sequence[int], givens: Sequence[int]) -> str:
    """Render ``grid`` (current digits) marking the cells that are ``givens`` (non-zero).

    Both are flat row-major lists of length 16 or 81.  Lines carry no trailing spaces.
    """
    n = {16: 4, 81: 9}[len(grid)]
    template, cells = _layout(n)
    given = n + 1
    return template.format(
        *[tokens[given + v if g else v] for tokens, v, g in zip(cells, grid, givens)]
    )


@cache
def _fresh_tokens(n: int) -> tuple[str, tuple[tuple[str, ...], ...]]:
    """:func:`_layout` with per cell the token of a *fresh* puzzle's value ``v`` (the
    grid equals the givens: ``v`` a given digit, ``0`` empty), indexed by ``v``."""
    template, cells = _layout(n)
    return template, tuple(tuple(t[n + 1 + v] if v else t[0] for v in range(n + 1)) for t in cells)


def render_fresh(givens: Sequence[int]) -> str:
    """``render_grid(givens, givens)``: a puzzle before any move (one token look-up per
    cell, no zip of two grids; equal for every grid, tested)."""
    template, cells = _fresh_tokens({16: 4, 81: 9}[len(givens)])
    return template.format(*map(getitem, cells, givens))
