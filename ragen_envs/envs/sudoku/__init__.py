"""Sudoku: fill a 4x4 or 9x9 grid; moves are checked against the rules.

Modules: :mod:`.grid` (geometry, text form), :mod:`.solver` (exact search),
:mod:`.generator` (unique-solution puzzles), :mod:`.moves` (action grammar),
:mod:`.render` (grid rendering), :mod:`.env` (the environment).  Spec:
``docs/envs/sudoku.md``.
"""

from .env import SudokuEnv
from .generator import EMPTY_CELLS, Puzzle, generate_attempt
from .grid import from_text, geometry, to_text
from .moves import Move, parse_move
from .solver import SearchBudgetExceeded, count_solutions, random_solution, solve

__all__ = [
    "EMPTY_CELLS",
    "Move",
    "Puzzle",
    "SearchBudgetExceeded",
    "SudokuEnv",
    "count_solutions",
    "from_text",
    "generate_attempt",
    "geometry",
    "parse_move",
    "random_solution",
    "solve",
    "to_text",
]
