"""Sudoku puzzle generation with a unique solution.

One attempt (run by :func:`ragen_envs.seeding.sample_instance` on a stably derived
generator):

1. Draw a random complete grid by randomised backtracking (:func:`.solver.random_solution`).
2. Reject it unless its canonical text belongs to the requested split
   (:func:`ragen_envs.seeding.in_split`); a solution grid, and so every puzzle made
   from it, lives in exactly one split.
3. Visit the cells in a random order and empty each one if the puzzle keeps exactly one
   solution: with cell ``c`` emptied, a second solution exists iff the puzzle has a
   solution with ``c`` different from its current digit, which one bounded search with
   that digit excluded at ``c`` decides (equivalent to counting solutions up to 2).  A
   search that exceeds its node budget keeps the digit (never risks a second solution).
   Stop when the target number of empty cells is reached; the attempt fails if the
   cells run out first.

RAGEN (RAGEN-AI/RAGEN ragen/env/, Sudoku) removes random cells without checking uniqueness.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from ...pcg64 import PCG64Stream
from ...seeding import in_split
from . import four
from .grid import geometry, solution_key
from .solver import SearchBudgetExceeded, random_solution, solve

#: Target number of empty cells per side and difficulty: RAGEN's removal fractions
#: (easy / medium / hard = 40 / 50 / 60 % of the cells, rounded down; RAGEN-AI/RAGEN
#: ragen/env/ Sudoku), i.e. 6 / 8 / 9 of 16 and 32 / 40 / 48 of 81.
EMPTY_CELLS: dict[int, dict[str, int]] = {
    4: {"easy": 6, "medium": 8, "hard": 9},
    9: {"easy": 32, "medium": 40, "hard": 48},
}

#: Node budget of the search that draws a complete grid.
FILL_BUDGET = 20_000
#: Node budget of each uniqueness search.
UNIQUENESS_BUDGET = 2_000


@dataclass(frozen=True)
class Puzzle:
    """A generated puzzle.

    Attributes:
        givens: flat grid of the givens (0 = empty), length ``n * n``.
        solution: its unique solution.
    """

    givens: tuple[int, ...]
    solution: tuple[int, ...]

    @property
    def n(self) -> int:
        """Side of the grid."""
        return {16: 4, 81: 9}[len(self.givens)]

    @property
    def num_empty(self) -> int:
        """Number of empty cells in the puzzle."""
        return self.givens.count(0)

    def key(self) -> bytes:
        """Split key: the canonical text of the solution grid."""
        return solution_key(self.solution)


@functools.cache
def _four_by_four_index() -> tuple[int, tuple[tuple[int, ...], ...]]:
    """Every complete 4x4 grid (there are 288) as one bit of a Python int.

    Returns ``(all_bits, has)`` where ``has[cell][digit]`` has bit ``k`` set iff grid
    ``k`` holds ``digit`` at ``cell``.  The grids consistent with a set of givens are the
    AND of their ``has`` entries, so a 4x4 uniqueness question is ~16 integer ANDs
    instead of a search.  Built once per process (one exhaustive search, ~10 ms).
    """
    grids = solve([0] * 16, limit=10_000)
    has = [[0] * 5 for _ in range(16)]
    for k, grid in enumerate(grids):
        for cell, digit in enumerate(grid):
            has[cell][digit] |= 1 << k
    return (1 << len(grids)) - 1, tuple(tuple(row) for row in has)


def has_unique_solution_without(
    grid: list[int], cell: int, digit: int, budget: int | None = UNIQUENESS_BUDGET
) -> bool:
    """True when ``grid`` with ``cell`` emptied still has exactly one solution.

    ``grid`` must be uniquely solvable with ``grid[cell] == digit``; the answer is
    "no solution with ``cell != digit``".  ``grid`` is left unchanged.  A 4x4 grid is
    answered from the table of all 288 complete grids (:func:`_four_by_four_index`;
    exact, so never over budget), a 9x9 grid by one bounded search.

    Raises:
        SearchBudgetExceeded: the search needed more than ``budget`` nodes.
    """
    if len(grid) == 16:
        consistent, has = _four_by_four_index()
        for j, v in enumerate(grid):
            if v and j != cell:
                consistent &= has[j][v]
        return not consistent & ~has[cell][digit]
    g = geometry({16: 4, 81: 9}[len(grid)])
    trial = list(grid)
    trial[cell] = 0
    allowed = [g.full] * g.cells
    allowed[cell] = g.full & ~(1 << digit)
    return not solve(trial, limit=1, allowed=allowed, budget=budget)


def generate_attempt(
    rng: np.random.Generator | PCG64Stream, n: int, num_empty: int, split: str | None
) -> Puzzle | None:
    """One generation attempt (see the module docstring); ``None`` when it fails.

    Args:
        rng: the attempt's generator, or its pure-Python stream
            (:func:`ragen_envs.seeding.attempt_stream`): the same puzzle either way; a
            4x4 stream attempt runs on precomputed tables (:mod:`.four`).
        n: side, 4 or 9.
        num_empty: target number of empty cells.
        split: required split of the solution grid, or ``None``.
    """
    if isinstance(rng, PCG64Stream):
        if n == 4:
            found = four.attempt(rng, num_empty, split)
            return None if found is None else Puzzle(*found)
        rng = rng.generator()
    solution = random_solution(n, rng, budget=FILL_BUDGET)
    if solution is None or not in_split(solution_key(solution), split):
        return None
    grid = list(solution)
    removed = 0
    for cell in rng.permutation(n * n).tolist():
        if removed == num_empty:
            break
        try:
            unique = has_unique_solution_without(grid, cell, grid[cell])
        except SearchBudgetExceeded:
            unique = False
        if unique:
            grid[cell] = 0
            removed += 1
    if removed < num_empty:
        return None
    return Puzzle(tuple(grid), tuple(solution))
