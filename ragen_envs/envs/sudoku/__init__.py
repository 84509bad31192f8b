"""Sudoku: fill a 4x4 or 9x9 grid; moves are checked against the rules.

Modules: :mod:`.grid` (geometry, text form), :mod:`.solver` (exact search),
:mod:`.generator` (unique-solution puzzles), :mod:`.moves` (action grammar),
:mod:`.render` (grid rendering), :mod:`.env` (the environment), :mod:`.register`
(the ``register_env`` calls); config and info schemas beside them.  Spec:
``docs/envs/sudoku.md``.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["SudokuEnv"],
        ".generator": ["EMPTY_CELLS", "Puzzle", "generate_attempt"],
        ".grid": ["from_text", "geometry", "to_text"],
        ".moves": ["Move", "parse_move"],
        ".solver": ["SearchBudgetExceeded", "count_solutions", "random_solution", "solve"],
    },
)
