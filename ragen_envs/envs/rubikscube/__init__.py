"""The 2x2x2 Rubik's Cube (pocket cube): solve a scramble with quarter turns.

Modules: :mod:`.cube` (sticker layout, turns and rotations derived from geometry,
corner cubies, state checks, the net rendering), :mod:`.solver` (the exact optimal
solver over all 3,674,160 positions, the oracle), :mod:`.env` (the environment),
:mod:`.register` (its ids).  Config and info schemas: ``config.schema.json``, ``info.schema.json``
beside them.  Spec: ``docs/envs/rubikscube.md``.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".cube": [
            "ACTIONS",
            "COLOURS",
            "MOVES",
            "SOLVED",
            "apply",
            "check_state",
            "is_solved",
            "parse_state",
            "render_net",
        ],
        ".env": ["RubiksCubeEnv", "scramble"],
        ".solver": ["distance", "distance_table", "solve"],
    },
)
