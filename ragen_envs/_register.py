"""Registration of every ragen environment id and preset (imported by ``ragen_envs``).

Each env package registers its own ids and presets in ``ragen_envs/envs/<key>/register.py``
(with the agent-loop defaults, turns and actions per turn, the task is meant to be played
with).  This module imports them, in one place and in a fixed order, so that
``ragen_envs.list_envs()``, the README table and the golden tests all see the same set.
Adding an environment adds one line here (``docs/envs/adding-an-env.md``).
"""

from __future__ import annotations

from .envs.bandit import register  # noqa: F401
from .envs.countdown import register  # noqa: F401
from .envs.frozenlake import register  # noqa: F401
from .envs.sokoban import register  # noqa: F401
from .envs.sudoku import register  # noqa: F401
from .envs.metamathqa import register  # noqa: F401
from .envs.deepcoder import register  # noqa: F401
from .envs.searchqa import register  # noqa: F401
from .envs.webshop import register  # noqa: F401
from .envs.lean import register  # noqa: F401
from .envs.game2048 import register  # noqa: F401
from .envs.rubikscube import register  # noqa: F401
