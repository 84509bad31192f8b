"""Exact Sudoku solving with bit masks and minimum-remaining-values branching.

Depth-first search that always branches on the empty cell with the fewest candidate
digits (the "minimum remaining values" heuristic, Russell & Norvig, AIMA 4th ed., §6.3.1);
a cell with one candidate is a forced move, a cell with none ends the branch.  Row,
column and box contents are bit masks, so a cell's candidates are
``full & ~(row | col | box)``.  Work is bounded by a node budget: a search that exceeds
it raises :class:`SearchBudgetExceeded` instead of running on.  A random 4x4 grid
(:func:`random_solution`) walks a tree of this search precomputed once per process
(:func:`_fill_tree`): the same grid, draws and node count without the per-node scan.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .grid import geometry


class SearchBudgetExceeded(RuntimeError):
    """The search visited more nodes than its budget allowed."""


@functools.cache
def _tables(
    n: int,
) -> tuple[tuple[tuple[int, int, int], ...], tuple[int, ...], tuple[tuple[int, ...], ...]]:
    """Per-side look-up tables of the search, built once.

    Returns ``(units, count_of, digits_of)``: ``units[i]`` is cell ``i``'s row, column
    and box as indices into one list of ``3 * n`` unit masks (rows, then columns, then
    boxes); for a candidate mask ``m`` (bits ``1..n``), ``count_of[m]`` is its number of
    digits and ``digits_of[m]`` its digits in increasing order.
    """
    g = geometry(n)
    units = tuple((g.row[i], n + g.col[i], 2 * n + g.box_of[i]) for i in range(g.cells))
    masks = range(1 << (n + 1))
    return (
        units,
        tuple(m.bit_count() for m in masks),
        tuple(tuple(d for d in range(1, n + 1) if m >> d & 1) for m in masks),
    )


def _branch(
    empty: list[int],
    used: list[int],
    free: list[int],
    units: Sequence[tuple[int, int, int]],
    count_of: Sequence[int],
) -> tuple[int, int]:
    """The branching choice of a search node: ``(k, mask)`` for cell ``empty[k]`` with
    candidate mask ``mask``, or ``(-1, 0)`` for a dead end.

    The first cell in ``empty`` order with the fewest candidates, the scan stopping at
    the first cell with one; a cell with none met before that ends the branch.
    """
    best_k, best_mask, best_count = -1, 0, 99
    for k, i in enumerate(empty):
        a, b, c = units[i]
        mask = free[i] & ~(used[a] | used[b] | used[c])
        if not mask:
            return -1, 0
        count = count_of[mask]
        if count < best_count:
            best_k, best_mask, best_count = k, mask, count
            if count == 1:
                break
    return best_k, best_mask


#: A node of :func:`_fill_tree`: ``(digits, children, None)`` for a branching cell
#: (``children[j]`` follows ``digits[j]``), ``(None, None, grid)`` for a complete grid,
#: ``None`` for a dead end.
FillNode = tuple[Any, Any, Any] | None


@functools.cache
def _fill_tree(n: int) -> FillNode:
    """The whole search tree of ``solve([0] * n * n, limit=1, rng=...)``, every branch.

    From the empty grid a node's state follows from the digits chosen on the way to it
    (a node restores the ``empty`` order it found), so the branching cell and its
    digits are the same for every digit order an ``rng`` may give: one exhaustive run
    of :func:`_search` (digits in increasing order, no solution limit), traced node by
    node, gives the tree.  For ``n = 4`` it has 2,369 nodes (its leaves are the 288
    complete grids), built once per process in a few milliseconds; a random 4x4 grid is
    then a walk down it (:func:`random_solution`), with the same draws and node counts
    as the search.
    """
    stack: list[list[Any]] = [[]]  # per open node: its digits, then its finished children

    def trace(digits: tuple[int, ...] | None, grid: list[int] | None) -> None:
        if grid is not None:
            stack[-1].append((None, None, tuple(grid)))
        elif digits is None:
            stack[-1].append(None)  # dead end
        elif digits:
            stack.append([digits])
        else:  # () closes the open node
            digits, *children = stack.pop()
            stack[-1].append((digits, tuple(children), None))

    _search([0] * (n * n), None, None, 1 << 62, None, trace)
    return stack[0][0]


def _walk_fill_tree(n: int, rng: np.random.Generator, budget: int | None) -> list[int] | None:
    """:func:`solve`'s first solution from the empty grid with ``rng``, walked down
    :func:`_fill_tree` (``None`` if there is none).

    Raises:
        SearchBudgetExceeded: more than ``budget`` nodes were visited.
    """
    permutation = rng.permutation
    nodes = 0

    def walk(node: FillNode) -> tuple[int, ...] | None:
        nonlocal nodes
        nodes += 1
        if budget is not None and nodes > budget:
            raise SearchBudgetExceeded(f"more than {budget} search nodes")
        if node is None:
            return None
        digits, children, grid = node
        if grid is not None:
            return grid
        for j in permutation(len(digits)).tolist() if len(digits) > 1 else (0,):
            found = walk(children[j])
            if found is not None:
                return found
        return None

    found = walk(_fill_tree(n))
    return None if found is None else list(found)


def _search(
    grid: Sequence[int],
    allowed: Sequence[int] | None,
    budget: int | None,
    limit: int,
    rng: np.random.Generator | None,
    trace: Callable[[tuple[int, ...] | None, list[int] | None], None] | None = None,
) -> list[list[int]]:
    """The depth-first search behind :func:`solve` (see the module docstring).

    The branching cell is the first empty cell, in the order of the ``empty`` list
    (swap-removed on entry, restored on exit), whose candidate count is smallest (the
    scan stops at a count of one; a cell with none ends the branch); its digits are
    tried in increasing order, or in the order of ``rng.permutation`` when ``rng`` is
    given and there are several.  Every call counts one node against ``budget``.  The
    visiting order, and so every draw from ``rng``, is part of the contract: a seeded
    random grid depends on it (golden files).  ``trace`` (for :func:`_fill_tree`), when
    given, hears of every node: ``(None, grid)`` a complete grid, ``(None, None)`` a
    dead end, ``(digits, None)`` a branching cell's digits in trying order, then
    ``((), None)`` when that node is left.
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
            if trace is not None:
                trace(None, work)
            solutions.append(work.copy())
            return len(solutions) >= limit
        best_k, best_mask = _branch(empty, used, free, units, count_of)
        if best_k < 0:
            if trace is not None:
                trace(None, None)
            return False
        cell = empty[best_k]
        empty[best_k] = empty[-1]
        empty.pop()
        a, b, c = units[cell]
        digits = digits_of[best_mask]
        if permutation is not None and len(digits) > 1:
            digits = tuple(digits[j] for j in permutation(len(digits)).tolist())
        if trace is not None:
            trace(digits, None)
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
        if trace is not None:
            trace((), None)
        work[cell] = 0
        empty.append(cell)
        empty[best_k], empty[-1] = empty[-1], empty[best_k]
        return done

    dfs()
    return solutions


def solve(
    grid: Sequence[int],
    *,
    limit: int = 2,
    allowed: Sequence[int] | None = None,
    budget: int | None = None,
    rng: np.random.Generator | None = None,
) -> list[list[int]]:
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


def random_solution(
    n: int, rng: np.random.Generator, budget: int | None = None
) -> list[int] | None:
    """A random complete ``n x n`` grid by randomised backtracking from the empty grid.

    The grid of ``solve([0] * (n * n), limit=1, budget=budget, rng=rng)``; for ``n = 4``
    walked down the precomputed search tree (:func:`_fill_tree`: same grid, same draws
    from ``rng``, same node count, without the per-node scan).  Returns ``None`` when
    the search exceeds ``budget`` (the caller retries with a new generator).
    """
    try:
        if n == 4:
            return _walk_fill_tree(n, rng, budget)
        found = solve([0] * (n * n), limit=1, budget=budget, rng=rng)
    except SearchBudgetExceeded:
        return None
    return found[0] if found else None
