"""Sudoku geometry: cell indexing, units and the text form of a grid.

A grid of side ``n`` (4 or 9; boxes of ``b x b`` with ``b = sqrt(n)``) is a flat list
of ``n * n`` ints, row-major, ``0`` for an empty cell and ``1..n`` for a digit.  Cell
``i`` is at zero-indexed ``(row, col) = divmod(i, n)``; the agent-facing grammar and
renderings number rows and columns from 1.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache


@dataclass(frozen=True)
class Geometry:
    """Index tables of an ``n x n`` Sudoku.

    Attributes:
        n: side (4 or 9).
        box: box side ``sqrt(n)``.
        row / col / box_of: unit index of each cell, tuples of length ``n * n``.
        full: bit mask with bits ``1..n`` set (bit ``d`` stands for digit ``d``).
    """

    n: int
    box: int
    row: tuple[int, ...]
    col: tuple[int, ...]
    box_of: tuple[int, ...]
    full: int

    @property
    def cells(self) -> int:
        """``n * n``."""
        return self.n * self.n

    def index(self, row: int, col: int) -> int:
        """Flat index of zero-indexed ``(row, col)``."""
        return row * self.n + col

    def peers(self, cell: int) -> tuple[int, ...]:
        """Cells sharing a row, column or box with ``cell`` (``cell`` excluded), ascending."""
        return _peers(self.n)[cell]


@cache
def geometry(n: int) -> Geometry:
    """The :class:`Geometry` of side ``n``.

    Raises:
        ValueError: ``n`` is not a perfect square >= 4.
    """
    b = math.isqrt(n)
    if b * b != n or n < 4:
        raise ValueError(f"Sudoku side must be a perfect square >= 4, got {n}")
    cells = range(n * n)
    return Geometry(
        n=n,
        box=b,
        row=tuple(i // n for i in cells),
        col=tuple(i % n for i in cells),
        box_of=tuple((i // n // b) * b + (i % n) // b for i in cells),
        full=((1 << n) - 1) << 1,
    )


@cache
def _peers(n: int) -> tuple[tuple[int, ...], ...]:
    g = geometry(n)
    return tuple(
        tuple(
            j
            for j in range(n * n)
            if j != i
            and (g.row[j] == g.row[i] or g.col[j] == g.col[i] or g.box_of[j] == g.box_of[i])
        )
        for i in range(n * n)
    )


def to_text(grid: list[int] | tuple[int, ...]) -> str:
    """Compact one-line text: digits row-major, ``.`` for empty (e.g. ``"1.3.....``)."""
    return "".join(str(v) if v else "." for v in grid)


def from_text(text: str) -> list[int]:
    """Parse :func:`to_text` output; whitespace is ignored and ``0`` also means empty.

    Raises:
        ValueError: the length is not 16 or 81, or a character is not a digit in range
            or ``.``.
    """
    chars = [ch for ch in text if not ch.isspace()]
    n = {16: 4, 81: 9}.get(len(chars))
    if n is None:
        raise ValueError(f"a puzzle needs 16 or 81 cells, got {len(chars)}")
    out = []
    for ch in chars:
        if ch in ".0":
            out.append(0)
        elif ch.isascii() and ch.isdigit() and 1 <= int(ch) <= n:
            out.append(int(ch))
        else:
            raise ValueError(f"bad cell {ch!r}: use 1..{n} or '.'")
    return out


def solution_key(solution: list[int] | tuple[int, ...]) -> bytes:
    """Split key of a solution grid (see :meth:`ragen_envs.envs.sudoku.generator.Puzzle.key`):
    ``b"sudoku:" + to_text(solution)``."""
    return ("sudoku:" + to_text(solution)).encode("ascii")
