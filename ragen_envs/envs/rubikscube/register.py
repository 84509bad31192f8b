"""Ids of the 2x2x2 Rubik's Cube (spec: docs/envs/rubikscube.md).

The base id is RAGEN's ``rubikscube`` entry (RAGEN-AI/RAGEN config/envs.yaml: scramble depth 1, 20 steps;
its run script plays 4 actions per turn).  Presets raise the scramble depth; ``Scrambled``
(30 random turns) is close to a uniformly random position (optimal solutions of up to 14
turns, God's number in the quarter-turn metric).  Every preset keeps RAGEN's 20-step limit,
which the optimal oracle always meets, and turns x actions per turn of at least 20.
"""

from __future__ import annotations

from ...registry import register_env

register_env(
    "RubiksCube",
    version=0,
    env_key="rubikscube",
    entry_point="ragen_envs.envs.rubikscube:RubiksCubeEnv",
    description="2x2x2 Rubik's Cube scrambled by one random quarter turn (RAGEN's rubikscube); "
    "optimal-solver oracle.",
    presets={
        "Depth2": ("2x2x2 cube, 2 random quarter turns.", {"scramble_depth": 2}),
        "Depth3": ("2x2x2 cube, 3 random quarter turns.", {"scramble_depth": 3}),
        "Depth5": ("2x2x2 cube, 5 random quarter turns.", {"scramble_depth": 5}),
        "Depth8": ("2x2x2 cube, 8 random quarter turns.", {"scramble_depth": 8}),
        "Scrambled": (
            "2x2x2 cube, 30 random quarter turns (about a random position; optimal <= 14 turns).",
            {"scramble_depth": 30},
            {"max_turns": 10, "max_actions_per_turn": 4},
        ),
    },
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 4},
)
