"""2048 board dynamics: slides, merges, tile spawns and the merge reward.

A board is a tuple of 16 tile values in row-major order (row 0 at the top), ``0`` for
an empty cell.  Moves are ``Up``, ``Right``, ``Down``, ``Left`` (RAGEN's action order
0..3, RAGEN-AI/RAGEN ragen/env/).

The rules (Gabriele Cirulli's 2048, as RAGEN's ``game_2048`` env plays them): a move
slides every tile as far as it goes towards one wall; two equal tiles that meet merge
into one tile of twice the value, each tile merges at most once per move, and merges are
resolved from the wall outwards (``[2, 2, 2, 2]`` left is ``[4, 4, 0, 0]``; ``[4, 4, 8,
0]`` left is ``[8, 8, 0, 0]``, the new 8 does not merge again).  A move that changes
nothing is illegal.  After every legal move one tile spawns on a uniformly chosen empty
cell: a 2 with probability 0.9, else a 4.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Sequence

import numpy as np

SIZE = 4
#: The four moves, in RAGEN's action order.
MOVES: tuple[str, ...] = ("Up", "Right", "Down", "Left")


def _lines(move: str) -> tuple[tuple[int, ...], ...]:
    """The board's four lines for ``move``, each ordered from the wall tiles slide to."""
    rows = [tuple(r * SIZE + c for c in range(SIZE)) for r in range(SIZE)]
    cols = [tuple(r * SIZE + c for r in range(SIZE)) for c in range(SIZE)]
    return {
        "Left": tuple(rows),
        "Right": tuple(tuple(reversed(r)) for r in rows),
        "Up": tuple(cols),
        "Down": tuple(tuple(reversed(c)) for c in cols),
    }[move]


#: Cell indices of each move's lines (wall first).
LINES: dict[str, tuple[tuple[int, ...], ...]] = {m: _lines(m) for m in MOVES}


@functools.cache
def slide_line(line: tuple[int, ...]) -> tuple[tuple[int, ...], int]:
    """Slide one line towards its first cell and merge.

    Args:
        line: tile values, the wall side first (``0`` = empty).

    Returns:
        ``(new_line, merge_score)`` where ``merge_score`` is the sum of the values of the
        tiles created by merges (the classic 2048 score increment; RAGEN's ``reward_merge``).
    """
    tiles = [v for v in line if v]
    out, score, i = [], 0, 0
    while i < len(tiles):
        if i + 1 < len(tiles) and tiles[i] == tiles[i + 1]:
            out.append(2 * tiles[i])
            score += 2 * tiles[i]
            i += 2
        else:
            out.append(tiles[i])
            i += 1
    out += [0] * (len(line) - len(out))
    return tuple(out), score


def _scatter(move: str) -> operator.itemgetter:
    """Maps the four slid lines of ``move``, concatenated, back to row-major cell order."""
    position = [0] * (SIZE * SIZE)
    for k, idx in enumerate(LINES[move]):
        for j, cell in enumerate(idx):
            position[cell] = k * SIZE + j
    return operator.itemgetter(*position)


#: Per move: one getter per line (the line's tile values, wall first), and the getter that
#: puts the concatenated slid lines back in row-major order.
_GET_LINES = {m: tuple(operator.itemgetter(*idx) for idx in LINES[m]) for m in MOVES}
_SCATTER = {m: _scatter(m) for m in MOVES}


def move(board: Sequence[int], name: str) -> tuple[tuple[int, ...], int]:
    """Apply a move (no spawn).  Returns ``(new_board, merge_score)``; ``new_board ==
    tuple(board)`` when the move is illegal.  ``KeyError`` for an unknown move name."""
    (a, sa), (b, sb), (c, sc), (d, sd) = (slide_line(get(board)) for get in _GET_LINES[name])
    return _SCATTER[name](a + b + c + d), sa + sb + sc + sd


def legal_moves(board: Sequence[int]) -> list[str]:
    """The moves that change ``board``, in :data:`MOVES` order."""
    b = tuple(board)
    return [m for m in MOVES if move(b, m)[0] != b]


def spawn(
    board: Sequence[int], rng: np.random.Generator, two_probability: float
) -> tuple[tuple[int, ...], tuple[int, int]]:
    """Put one tile on a uniformly chosen empty cell.

    Draws, in order, ``rng.integers(n_empty)`` (the cell, among the empty cells in
    row-major order) and ``rng.random()`` (a 2 when below ``two_probability``, else a
    4): RAGEN's draws and order (its ``_spawn_tile``, ``two_prob`` 0.9).  Returns ``(new_board, (cell, value))``.

    Raises:
        ValueError: the board is full.
    """
    empty = [i for i, v in enumerate(board) if v == 0]
    if not empty:
        raise ValueError("no empty cell to spawn a tile on")
    cell = empty[int(rng.integers(len(empty)))]
    value = 2 if float(rng.random()) < two_probability else 4
    out = list(board)
    out[cell] = value
    return tuple(out), (cell, value)


def merge_reward(merge_score: int) -> float:
    """RAGEN's 2048 reward of a legal move: ``0.1 * log2(merge_score + 1)`` when the move
    merged tiles (``merge_score > 0``), else 0 (RAGEN-AI/RAGEN ragen/env/)."""
    return 0.1 * math.log2(merge_score + 1) if merge_score > 0 else 0.0


def parse_board(rows: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """A board from 4 rows of 4 tile values (0 or a power of two >= 2).

    Raises:
        ValueError: wrong shape or a value that is no tile.
    """
    if len(rows) != SIZE or any(len(r) != SIZE for r in rows):
        raise ValueError(f"a board is {SIZE} rows of {SIZE} values")
    flat = tuple(int(v) for r in rows for v in r)
    bad = [v for v in flat if v != 0 and (v < 2 or v & (v - 1))]
    if bad:
        raise ValueError(f"tile values must be 0 or powers of two >= 2, got {bad[0]}")
    return flat


def rows_of(board: Sequence[int]) -> list[list[int]]:
    """The board as 4 lists of 4 values (the ``info["board"]`` format)."""
    return [list(board[r * SIZE : (r + 1) * SIZE]) for r in range(SIZE)]


def render(board: Sequence[int]) -> str:
    """The grid, one row per line, tiles right-aligned to the widest, ``.`` for empty::

    2 . . .
    . 4 . .
    """
    width = max(len(str(v)) for v in board)
    return "\n".join(
        " ".join(f"{v if v else '.':>{width}}" for v in board[r * SIZE : (r + 1) * SIZE])
        for r in range(SIZE)
    )
