"""Registers ``ragen/Sokoban-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# Sokoban (spec: docs/envs/sokoban.md). Presets follow RAGEN's config/envs.yaml
# (RAGEN-AI/RAGEN config/envs.yaml): SimpleSokoban (base), LargerSokoban, CoordSokoban,
# SokobanDifferentGridVocab; plus our bundled XSB levels.
register_env(
    "Sokoban",
    version=0,
    env_key="sokoban",
    entry_point="ragen_envs.envs.sokoban:SokobanEnv",
    description="Sokoban, 6x6 room with one box, grid observation (RAGEN SimpleSokoban).",
    presets={
        "Large": (
            "Sokoban, 8x8 room with two boxes, solutions of at most 10 steps (RAGEN LargerSokoban).",
            {"dim_room": [8, 8], "num_boxes": 2, "search_depth": 10},
            {"max_turns": 5, "max_actions_per_turn": 2},
        ),
        "Coord": (
            "Sokoban, 6x6 room with one box, coordinate lists plus grid (RAGEN CoordSokoban).",
            {"observation_format": "grid_coord"},
        ),
        "Vocab": (
            "Sokoban, 6x6 room with one box, alternative grid symbols W . G C B A @ "
            "(RAGEN SokobanDifferentGridVocab).",
            {
                "search_depth": 30,
                "grid_vocab": {
                    "wall": "W",
                    "empty": ".",
                    "target": "G",
                    "box_on_target": "C",
                    "box": "B",
                    "player": "A",
                    "player_on_target": "@",
                },
            },
        ),
        "Easy": (
            "Sokoban, 6x6 room with one box, solutions of at most 3 moves (a curriculum level; "
            "learnable by the tiny model on a CPU).",
            {"search_depth": 3},
            {"max_turns": 4, "max_actions_per_turn": 1},
        ),
        "Levels": (
            "Sokoban, our ten bundled XSB levels of graded difficulty; seed s plays level s mod 10.",
            {"levels": "builtin:starter"},
            {"max_turns": 30, "max_actions_per_turn": 2},
        ),
    },
    agent_defaults={"max_turns": 10, "max_actions_per_turn": 2},
)
