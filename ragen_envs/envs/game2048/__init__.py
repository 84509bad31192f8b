"""2048 on a 4x4 board: slide and merge tiles to reach a target tile.

Modules: :mod:`.board` (slides, merges, spawns, the merge reward, rendering),
:mod:`.expectimax` (the expectimax baseline policy), :mod:`.env` (the environment),
:mod:`.register` (its ids).  Spec: ``docs/envs/game2048.md``.
"""

from .board import MOVES, legal_moves, merge_reward, move, slide_line, spawn
from .env import Game2048Env
from .expectimax import best_move, heuristic

__all__ = ["MOVES", "Game2048Env", "best_move", "heuristic", "legal_moves", "merge_reward", "move", "slide_line",
           "spawn"]
