"""Sokoban (spec: ``docs/envs/sokoban.md``).

Modules, one job each:

* :mod:`.room` - layout, puzzle, push physics and reward table;
* :mod:`.generator` - procedural rooms (random-walk topology, reverse-play placement);
* :mod:`.reverse` - breadth-first reverse play with exact optimal distances;
* :mod:`.solver` - the optimal A* solver (the oracle);
* :mod:`.xsb` - reading and writing XSB level text;
* :mod:`.level_sets` - where fixed levels come from (built-in, inline, file);
* :mod:`.render` - grid / coord / grid_coord renders and symbol vocabularies;
* :mod:`.env` - :class:`SokobanEnv`, the Gymnasium environment;
* :mod:`.register` - the ``register_env`` calls (ids and presets).

Config and info schemas: ``config.schema.json``, ``info.schema.json`` beside them.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".env": ["SokobanEnv"],
        ".room": ["ACTION_NAMES", "Layout", "Puzzle"],
        ".solver": ["SolverBudgetExceeded", "solve"],
        ".xsb": ["XSBError", "format_level", "format_levels", "load_xsb", "parse_xsb"],
    },
)
