"""Exact Sudoku solving with bit masks and minimum-remaining-values branching.

Depth-first search that always branches on the empty cell with the fewest candidate
digits (the "minimum remaining values" heuristic, Russell & Norvig, AIMA 4th ed., §6.3.1);
a cell with one candidate is a forced move, a cell with none ends the branch.  Row,
column and box contents are bit masks, so a cell's candidates are
``full & ~(row | col | box)``.  Work is bounded by a node budget: a search that exceeds
it raises :class:`SearchBudgetExceeded` instead of running on.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from .grid import geometry


class SearchBudgetExceeded(RuntimeError):
    """The search visited more nodes than its budget allowed."""


@functools.cache
def _tables(n: int) -> tuple[tuple[tuple[int, int, int], ...], tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Per-side look-up tables of the search, built once.

    Returns ``(units, count_of, digits_of)``: ``units[i]`` is cell ``i``'s row, column
    and box as indices into one list of ``3 * n`` unit masks (rows, then columns, then
    boxes); for a candidate mask ``m`` (bits ``1..n``), ``count_of[m]`` is its number of
    digits and ``digits_of[m]`` its digits in increasing order.
    """
    g = geometry(n)
    units = tuple((g.row[i], n + g.col[i], 2 * n + g.box_of[i]) for i in range(g.cells))
    masks = range(1 << (n + 1))
    return (units, tuple(m.bit_count() for m in masks),
            tuple(tuple(d for d in range(1, n + 1) if m >> d & 1) for m in masks))


def _search(grid: Sequence[int], allowed: Sequence[int] | None, budget: int | None, limit: int,
            rng: np.random.Generator | None) -> list[list[int]]:
    """The depth-first search behind :func:`solve` (see the module docstring).

    The branching cell is the first empty cell, in the order of the ``empty`` list
    (swap-removed on entry, restored on exit), whose candidate count is smallest (the
    scan stops at a count of one; a cell with none ends the branch); its digits are
    tried in increasing order, or in the order of ``rng.permutation`` when ``rng`` is
    given and there are several.  Every call counts one node against ``budget``.  The
    visiting order, and so every draw from ``rng``, is part of the contract: a seeded
    random grid depends on it (golden files).
    """
    n = {16: 4, 81: 9}.get(len(grid))
    if n is None:
        raise ValueError(f"a grid needs 16 or 81 cells, got {len(grid)}")
    units, count_of, digits_of = _tables(n)
    full = geometry(n).full
    work = list(grid)
    used = [0] * (3 * n)
    for i, v in enumerate(work):
        if v:
            bit = 1 << v
            a, b, c = units[i]
            if (used[a] | used[b] | used[c]) & bit:
                return []  # the givens already conflict
            used[a] |= bit
            used[b] |= bit
            used[c] |= bit
    free = [full] * len(work) if allowed is None else [full & m for m in allowed]
    empty = [i for i, v in enumerate(work) if not v]
    solutions: list[list[int]] = []
    nodes = 0
    permutation = rng.permutation if rng is not None else None

    def dfs() -> bool:
        """Search from the current state; True when ``limit`` solutions have been found."""
        nonlocal nodes
        nodes += 1
        if budget is not None and nodes > budget:
            raise SearchBudgetExceeded(f"more than {budget} search nodes")
        if not empty:
            solutions.append(work.copy())
            return len(solutions) >= limit
        best_k, best_mask, best_count = -1, 0, 99
        for k, i in enumerate(empty):
            a, b, c = units[i]
            mask = free[i] & ~(used[a] | used[b] | used[c])
            if not mask:
                return False
            count = count_of[mask]
            if count < best_count:
                best_k, best_mask, best_count = k, mask, count
                if count == 1:
                    break
        cell = empty[best_k]
        empty[best_k] = empty[-1]
        empty.pop()
        a, b, c = units[cell]
        digits = digits_of[best_mask]
        if permutation is not None and best_count > 1:
            digits = [digits[j] for j in permutation(best_count).tolist()]
        done = False
        for d in digits:
            bit = 1 << d
            work[cell] = d
            used[a] |= bit
            used[b] |= bit
            used[c] |= bit
            done = dfs()
            used[a] ^= bit
            used[b] ^= bit
            used[c] ^= bit
            if done:
                break
        work[cell] = 0
        empty.append(cell)
        empty[best_k], empty[-1] = empty[-1], empty[best_k]
        return done

    dfs()
    return solutions


def solve(grid: Sequence[int], *, limit: int = 2, allowed: Sequence[int] | None = None,
          budget: int | None = None, rng: np.random.Generator | None = None) -> list[list[int]]:
    """Up to ``limit`` solutions of ``grid``.

    Args:
        grid: flat grid (16 or 81 ints, 0 = empty), see :mod:`.grid`.
        limit: stop after this many solutions (2 decides uniqueness).
        allowed: optional per-cell bit mask of digits the empty cells may take (used to
            ask "is there a solution where this cell differs from ...?").
        budget: maximum search nodes, or ``None`` for no bound.
        rng: when given, candidate digits are tried in a random order (used to draw
            random complete grids); otherwise in increasing order.

    Returns:
        The solutions found (each a new flat list), at most ``limit``; empty when the
        givens conflict or no solution exists.

    Raises:
        SearchBudgetExceeded: more than ``budget`` nodes were visited.
        ValueError: the grid does not have 16 or 81 cells.
    """
    return _search(grid, allowed, budget, limit, rng)


def count_solutions(grid: Sequence[int], limit: int = 2, budget: int | None = None) -> int:
    """Number of solutions of ``grid``, counted up to ``limit``."""
    return len(solve(grid, limit=limit, budget=budget))


def random_solution(n: int, rng: np.random.Generator, budget: int | None = None) -> list[int] | None:
    """A random complete ``n x n`` grid by randomised backtracking from the empty grid.

    Returns ``None`` when the search exceeds ``budget`` (the caller retries with a new
    generator).
    """
    try:
        found = solve([0] * (n * n), limit=1, budget=budget, rng=rng)
    except SearchBudgetExceeded:
        return None
    return found[0] if found else None
