"""Ids of 2048 (spec: docs/envs/game2048.md).

RAGEN's ``game_2048`` plays for the 2048 tile over up to 700 actions (RAGEN-AI/RAGEN config/envs.yaml),
which is out of reach in an agent budget of 10-50 turns: every legal move adds one tile
worth 2.2 on average, so a tile of value ``T`` needs at least ``(T - 4) / 2.2`` moves
whatever the policy (the expectimax baseline takes about 48, 94 and 174 moves for 64,
128 and 256).  So the ids aim at reachable targets; each step limit is about 1.5 times
the moves the baseline needs (its success rate per id is in benchmarks/README.md), and
turns x actions per turn equals the step limit.
"""

from __future__ import annotations

from ...registry import register_env

register_env(
    "2048",
    version=0,
    env_key="game2048",
    entry_point="ragen_envs.envs.game2048:Game2048Env",
    description="2048 on a 4x4 board, reach the 128 tile within 150 moves; RAGEN's merge reward, "
    "-0.1 for a move that changes nothing.",
    presets={
        "Target64": (
            "2048, reach the 64 tile within 80 moves.",
            {"target_tile": 64, "max_steps": 80},
            {"max_turns": 20, "max_actions_per_turn": 4},
        ),
        "Target256": (
            "2048, reach the 256 tile within 300 moves.",
            {"target_tile": 256, "max_steps": 300},
            {"max_turns": 50, "max_actions_per_turn": 6},
        ),
    },
    base_kwargs={},
    agent_defaults={"max_turns": 30, "max_actions_per_turn": 5},
)
