"""Sokoban (spec: ``docs/envs/sokoban.md``).

Modules, one job each:

* :mod:`.room` - layout, puzzle, push physics and reward table;
* :mod:`.generator` - procedural rooms (random-walk topology, reverse-play placement);
* :mod:`.reverse` - breadth-first reverse play with exact optimal distances;
* :mod:`.solver` - the optimal A* solver (the oracle);
* :mod:`.xsb` - reading and writing XSB level text;
* :mod:`.level_sets` - where fixed levels come from (built-in, inline, file);
* :mod:`.render` - grid / coord / grid_coord renders and symbol vocabularies;
* :mod:`.env` - :class:`SokobanEnv`, the Gymnasium environment.
"""

from .env import SokobanEnv
from .room import ACTION_NAMES, Layout, Puzzle
from .solver import SolverBudgetExceeded, solve
from .xsb import XSBError, format_level, format_levels, load_xsb, parse_xsb

__all__ = [
    "ACTION_NAMES",
    "Layout",
    "Puzzle",
    "SokobanEnv",
    "SolverBudgetExceeded",
    "XSBError",
    "format_level",
    "format_levels",
    "load_xsb",
    "parse_xsb",
    "solve",
]
