"""Registration of every ragen environment id and preset (imported by ``ragen_envs``).

Each env package registers its own ids and presets in ``ragen_envs/envs/<key>/register.py``
(with the agent-loop defaults, turns and actions per turn, the task is meant to be played
with).  This module imports them, in one place and in a fixed order, so that
``ragen_envs.list_envs()``, the README table and the golden tests all see the same set.
Adding an environment adds one line here (``docs/envs/adding-an-env.md``).
"""

from __future__ import annotations

from .envs.bandit import register as _bandit  # noqa: F401
from .envs.countdown import register as _countdown  # noqa: F401
from .envs.deepcoder import register as _deepcoder  # noqa: F401
from .envs.frozenlake import register as _frozenlake  # noqa: F401
from .envs.game2048 import register as _game2048  # noqa: F401
from .envs.lean import register as _lean  # noqa: F401
from .envs.metamathqa import register as _metamathqa  # noqa: F401
from .envs.rubikscube import register as _rubikscube  # noqa: F401
from .envs.searchqa import register as _searchqa  # noqa: F401
from .envs.sokoban import register as _sokoban  # noqa: F401
from .envs.sudoku import register as _sudoku  # noqa: F401
from .envs.webshop import register as _webshop  # noqa: F401
