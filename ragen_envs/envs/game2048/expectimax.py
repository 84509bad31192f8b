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
import operator
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


#: One getter per line of the heuristic, rows then columns (a line's values as a tuple).
_LINES = tuple(operator.itemgetter(*idx) for idx in (*_ROWS, *_COLS))


def _sum8(s: Sequence[float]) -> float:
    """``s[0] + ... + s[7]`` added left to right, as a ``total = 0.0; total += x`` loop does
    (``0.0 + x == x``), so the search's values do not depend on how they are computed."""
    return s[0] + s[1] + s[2] + s[3] + s[4] + s[5] + s[6] + s[7]


def heuristic(board: Sequence[int]) -> float:
    """Sum of :func:`line_score` over the rows and columns of ``board`` (rows first, top
    to bottom, then columns left to right, added in that order)."""
    return _sum8([line_score(get(board)) for get in _LINES])


@functools.cache
def _spawned_scores(line: tuple[int, ...], pos: int) -> dict[int, float]:
    """``{2: score, 4: score}``: :func:`line_score` of ``line`` with a 2 or a 4 at ``pos``."""
    return {v: line_score(line[:pos] + (v,) + line[pos + 1 :]) for v in (2, 4)}


def _max_node(board: tuple[int, ...], depth: int, p2: float) -> float:
    best = 0.0
    for name in MOVES:
        after, _ = move(board, name)
        if after != board:
            best = max(best, _chance_node(after, depth, p2))
    return best


def _chance_node(board: tuple[int, ...], depth: int, p2: float) -> float:
    """The mean, over every empty cell and both spawn values (weighted by their
    probabilities), of the heuristic after the spawn (``depth <= 1``) or of the max node
    one move deeper.

    At the last level a spawn on cell ``(r, c)`` changes only row ``r`` and column ``c``,
    so the heuristic of each child reuses the other six line scores of ``board`` (same
    terms, same order of addition: the value equals :func:`heuristic` of the child).
    """
    empty = [i for i, v in enumerate(board) if v == 0]
    if not empty:  # cannot happen after a legal move, kept for safety
        return heuristic(board)
    spawns = [(value, p) for value, p in ((2, p2), (4, 1.0 - p2)) if p > 0.0]
    total = 0.0
    if depth <= 1:
        lines = [get(board) for get in _LINES]
        scores = [line_score(line) for line in lines]
        for i in empty:
            r, c = divmod(i, 4)
            row, col = _spawned_scores(lines[r], c), _spawned_scores(lines[4 + c], r)
            child = scores.copy()
            for value, p in spawns:
                child[r], child[4 + c] = row[value], col[value]
                total += p * _sum8(child)
        return total / len(empty)
    cells = list(board)
    for i in empty:
        for value, p in spawns:
            cells[i] = value
            total += p * _max_node(tuple(cells), depth - 1, p2)
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
