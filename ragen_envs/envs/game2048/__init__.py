"""2048 on a 4x4 board: slide and merge tiles to reach a target tile.

Modules: :mod:`.board` (slides, merges, spawns, the merge reward, rendering),
:mod:`.expectimax` (the expectimax baseline policy), :mod:`.env` (the environment),
:mod:`.register` (its ids).  Config and info schemas: ``config.schema.json``, ``info.schema.json``
beside them.  Spec: ``docs/envs/game2048.md``.
"""

from ..._lazy import lazy_exports

__getattr__, __dir__, __all__ = lazy_exports(
    __name__,
    {
        ".board": ["MOVES", "legal_moves", "merge_reward", "move", "slide_line", "spawn"],
        ".env": ["Game2048Env"],
        ".expectimax": ["best_move", "heuristic"],
    },
)
