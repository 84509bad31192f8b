"""FrozenLake: cross a frozen lake to the goal without falling into a hole.

Modules: :mod:`.maps` (standard and random maps), :mod:`.dynamics` (transition table
and optimal policy), :mod:`.render` (text renderings), :mod:`.env` (the environment),
:mod:`.register` (the ``register_env`` calls); config and info schemas beside them.
Spec: ``docs/envs/frozenlake.md``.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".dynamics": [
            "ACTIONS",
            "Dynamics",
            "OptimalPolicy",
            "build_dynamics",
            "solve",
            "value_iteration",
        ],
        ".env": ["FrozenLakeEnv"],
        ".maps": ["STANDARD_MAPS", "FrozenMap", "random_map_attempt"],
    },
)
