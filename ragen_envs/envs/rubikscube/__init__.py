"""The 2x2x2 Rubik's Cube (pocket cube): solve a scramble with quarter turns.

Modules: :mod:`.cube` (sticker layout, turns and rotations derived from geometry,
corner cubies, state checks, the net rendering), :mod:`.solver` (the exact optimal
solver over all 3,674,160 positions, the oracle), :mod:`.env` (the environment),
:mod:`.register` (its ids).  Spec: ``docs/envs/rubikscube.md``.
"""

from .cube import ACTIONS, COLOURS, MOVES, SOLVED, apply, check_state, is_solved, parse_state, render_net
from .env import RubiksCubeEnv, scramble
from .solver import distance, distance_table, solve

__all__ = [
    "ACTIONS",
    "COLOURS",
    "MOVES",
    "SOLVED",
    "RubiksCubeEnv",
    "apply",
    "check_state",
    "distance",
    "distance_table",
    "is_solved",
    "parse_state",
    "render_net",
    "scramble",
    "solve",
]
