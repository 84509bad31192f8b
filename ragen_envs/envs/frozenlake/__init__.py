"""FrozenLake: cross a frozen lake to the goal without falling into a hole.

Modules: :mod:`.maps` (standard and random maps), :mod:`.dynamics` (transition table
and optimal policy), :mod:`.render` (text renderings), :mod:`.env` (the environment).
Spec: ``docs/envs/frozenlake.md``.
"""

from .dynamics import ACTIONS, Dynamics, OptimalPolicy, build_dynamics, solve, value_iteration
from .env import FrozenLakeEnv
from .maps import STANDARD_MAPS, FrozenMap, random_map_attempt

__all__ = [
    "ACTIONS",
    "Dynamics",
    "FrozenLakeEnv",
    "FrozenMap",
    "OptimalPolicy",
    "STANDARD_MAPS",
    "build_dynamics",
    "random_map_attempt",
    "solve",
    "value_iteration",
]
