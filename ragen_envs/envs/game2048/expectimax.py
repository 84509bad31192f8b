"""Depth-limited expectimax for 2048: the baseline policy of ``ragen/2048-*``.

Not an oracle: 2048 is stochastic and no tractable policy is optimal, so the
benchmark table (``benchmarks/README.md``) reports this policy's success rate per preset.

Search: a max node tries every legal move; a chance node averages over every empty cell
and both spawn values (2 with ``two_probability``, 4 otherwise); after ``depth`` moves
the board is scored by :func:`heuristic`.  A max node with no legal move scores 0 (the
game is lost).  The default depth (:func:`search_depth`) is 1, and 2 on a nearly full
board (at most :data:`DEEP_WHEN_EMPTY` empty cells), where one bad move loses the game
and the search is cheap: on the 256 target this lifts success from about 82-88% to 99% at
about 3x the time (``benchmarks/README.md``).

The heuristic is the line evaluation of nneonneo's 2048-ai (MIT; ``2048.cpp``,
``init_tables``), summed over the four rows and four columns: with ``r`` the tile
exponents of a line (0 for empty),
``200000 + 270 * empty + 700 * merges - 47 * min(mono_left, mono_right) - 11 * sum(r**3.5)``,
where ``merges`` counts adjacent equal non-empty tiles (runs, ignoring gaps) and
``mono_*`` sums ``r[i]**4 - r[i+1]**4`` over the steps going the wrong way.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

from .board import LINES, MOVES, move

_LOST = 200000.0
#: Search two moves deep when at most this many cells are empty (see :func:`search_depth`).
DEEP_WHEN_EMPTY = 2
_ROWS = LINES["Left"]
_COLS = LINES["Up"]


@functools.cache
def line_score(line: tuple[int, ...]) -> float:
    """The heuristic value of one line of tile values (see the module docstring)."""
    ranks = [v.bit_length() - 1 if v else 0 for v in line]
    empty = sum(1 for r in ranks if r == 0)
    merges, prev, counter, total = 0, 0, 0, 0.0
    for r in ranks:
        total += r**3.5
        if r == 0:
            continue
        if prev == r:
            counter += 1
        elif counter > 0:
            merges += 1 + counter
            counter = 0
        prev = r
    if counter > 0:
        merges += 1 + counter
    mono_left = mono_right = 0.0
    for a, b in zip(ranks, ranks[1:]):
        if a > b:
            mono_left += a**4 - b**4
        else:
            mono_right += b**4 - a**4
    return _LOST + 270.0 * empty + 700.0 * merges - 47.0 * min(mono_left, mono_right) - 11.0 * total


def heuristic(board: Sequence[int]) -> float:
    """Sum of :func:`line_score` over the rows and columns of ``board``."""
    s = 0.0
    for idx in _ROWS:
        s += line_score((board[idx[0]], board[idx[1]], board[idx[2]], board[idx[3]]))
    for idx in _COLS:
        s += line_score((board[idx[0]], board[idx[1]], board[idx[2]], board[idx[3]]))
    return s


def _max_node(board: tuple[int, ...], depth: int, p2: float) -> float:
    best = 0.0
    for name in MOVES:
        after, _ = move(board, name)
        if after != board:
            best = max(best, _chance_node(after, depth, p2))
    return best


def _chance_node(board: tuple[int, ...], depth: int, p2: float) -> float:
    empty = [i for i, v in enumerate(board) if v == 0]
    if not empty:  # cannot happen after a legal move, kept for safety
        return heuristic(board)
    total = 0.0
    cells = list(board)
    for i in empty:
        for value, p in ((2, p2), (4, 1.0 - p2)):
            if p <= 0.0:
                continue
            cells[i] = value
            child = tuple(cells)
            total += p * (heuristic(child) if depth <= 1 else _max_node(child, depth - 1, p2))
        cells[i] = 0
    return total / len(empty)


def search_depth(board: Sequence[int]) -> int:
    """The default search depth: 2 when at most :data:`DEEP_WHEN_EMPTY` cells are empty, else 1."""
    return 2 if sum(1 for v in board if v == 0) <= DEEP_WHEN_EMPTY else 1


def best_move(
    board: Sequence[int], depth: int | None = None, two_probability: float = 0.9
) -> str | None:
    """The expectimax move for ``board`` (first of :data:`.board.MOVES` on ties), or
    ``None`` when no move is legal.

    Args:
        board: 16 tile values, row-major.
        depth: moves searched (1 = this move, the spawn, then the heuristic);
            ``None``: :func:`search_depth` of the board.
        two_probability: probability that a spawned tile is a 2.
    """
    b = tuple(board)
    if depth is None:
        depth = search_depth(b)
    best, best_value = None, -1.0
    for name in MOVES:
        after, _ = move(b, name)
        if after == b:
            continue
        value = _chance_node(after, depth, two_probability)
        if value > best_value:
            best, best_value = name, value
    return best
