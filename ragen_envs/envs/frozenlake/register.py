"""Registers ``ragen/FrozenLake-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# FrozenLake (spec: docs/envs/frozenlake.md).  The base id follows RAGEN-2's main-table
# protocol (success_rate 1, deterministic; RAGEN-AI/RAGEN ragen/env/); Slippery is RAGEN v1's
# default (success_rate 0.8); the Standard presets reproduce Gymnasium's FrozenLake-v1 /
# FrozenLake8x8-v1 (fixed maps, success_rate 1/3, time limits 100 / 200).
register_env(
    "FrozenLake",
    version=0,
    env_key="frozenlake",
    entry_point="ragen_envs.envs.frozenlake:FrozenLakeEnv",
    description="Random 4x4 frozen lake (deterministic): reach the goal without falling into a hole.",
    presets={
        "Slippery": (
            "Random 4x4 lake, slippery ice (success_rate 0.8, RAGEN v1 default).",
            {"success_rate": 0.8},
            {"max_turns": 20, "max_actions_per_turn": 1},
        ),
        "8x8": (
            "Random 8x8 lake, deterministic.",
            {"size": 8},
            {"max_turns": 10, "max_actions_per_turn": 2},
        ),
        "Coord": (
            "Random 4x4 lake, deterministic, grid plus coordinate lists.",
            {"observation_format": "grid_coord"},
        ),
        "Standard4x4": (
            "Gymnasium's fixed 4x4 map, success_rate 1/3 (as FrozenLake-v1).",
            {"map_name": "4x4", "success_rate": 1.0 / 3.0, "max_steps": 100},
            {"max_turns": 50, "max_actions_per_turn": 2},
        ),
        "Standard8x8": (
            "Gymnasium's fixed 8x8 map, success_rate 1/3 (as FrozenLake8x8-v1).",
            {"map_name": "8x8", "success_rate": 1.0 / 3.0, "max_steps": 200},
            {"max_turns": 100, "max_actions_per_turn": 2},
        ),
    },
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 2},
)
