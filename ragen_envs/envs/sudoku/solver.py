"""Exact Sudoku solving with bit masks and minimum-remaining-values branching.

Depth-first search that always branches on the empty cell with the fewest candidate
digits (the "minimum remaining values" heuristic, Russell & Norvig, AIMA 4th ed., §6.3.1);
a cell with one candidate is a forced move, a cell with none ends the branch.  Row,
column and box contents are bit masks, so a cell's candidates are
``full & ~(row | col | box)``.  Work is bounded by a node budget: a search that exceeds
it raises :class:`SearchBudgetExceeded` instead of running on.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .grid import geometry


class SearchBudgetExceeded(RuntimeError):
    """The search visited more nodes than its budget allowed."""


class _Search:
    """One search over a partially filled grid (internal state of the solver)."""

    def __init__(self, grid: Sequence[int], allowed: Sequence[int] | None, budget: int | None):
        n = {16: 4, 81: 9}.get(len(grid))
        if n is None:
            raise ValueError(f"a grid needs 16 or 81 cells, got {len(grid)}")
        self.g = geometry(n)
        self.grid = list(grid)
        g = self.g
        self.rows = [0] * n
        self.cols = [0] * n
        self.boxes = [0] * n
        self.allowed = list(allowed) if allowed is not None else [g.full] * g.cells
        self.ok = True
        for i, v in enumerate(self.grid):
            if v:
                bit = 1 << v
                r, c, b = g.row[i], g.col[i], g.box_of[i]
                if (self.rows[r] | self.cols[c] | self.boxes[b]) & bit:
                    self.ok = False  # the givens already conflict
                self.rows[r] |= bit
                self.cols[c] |= bit
                self.boxes[b] |= bit
        self.empty = [i for i, v in enumerate(self.grid) if not v]
        self.budget = budget
        self.nodes = 0
        self.solutions: list[list[int]] = []

    def run(self, limit: int, rng: np.random.Generator | None) -> None:
        if self.ok:
            self._dfs(limit, rng)

    def _dfs(self, limit: int, rng: np.random.Generator | None) -> bool:
        """Search; returns True when ``limit`` solutions have been found."""
        self.nodes += 1
        if self.budget is not None and self.nodes > self.budget:
            raise SearchBudgetExceeded(f"more than {self.budget} search nodes")
        empty = self.empty
        if not empty:
            self.solutions.append(self.grid.copy())
            return len(self.solutions) >= limit
        g, rows, cols, boxes, allowed = self.g, self.rows, self.cols, self.boxes, self.allowed
        row_of, col_of, box_of = g.row, g.col, g.box_of
        best_k, best_mask, best_count = -1, 0, 99
        for k, i in enumerate(empty):
            mask = allowed[i] & ~(rows[row_of[i]] | cols[col_of[i]] | boxes[box_of[i]])
            if not mask:
                return False
            count = mask.bit_count()
            if count < best_count:
                best_k, best_mask, best_count = k, mask, count
                if count == 1:
                    break
        cell = empty[best_k]
        empty[best_k] = empty[-1]
        empty.pop()
        r, c, b = row_of[cell], col_of[cell], box_of[cell]
        digits = [d for d in range(1, g.n + 1) if best_mask >> d & 1]
        if rng is not None and len(digits) > 1:
            digits = [digits[j] for j in rng.permutation(len(digits))]
        done = False
        for d in digits:
            bit = 1 << d
            self.grid[cell] = d
            rows[r] |= bit
            cols[c] |= bit
            boxes[b] |= bit
            done = self._dfs(limit, rng)
            rows[r] &= ~bit
            cols[c] &= ~bit
            boxes[b] &= ~bit
            if done:
                break
        self.grid[cell] = 0
        empty.append(cell)
        empty[best_k], empty[-1] = empty[-1], empty[best_k]
        return done


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
    search = _Search(grid, allowed, budget)
    search.run(limit, rng)
    return search.solutions


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
