"""Registers ``ragen/Sudoku-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# Sudoku (spec: docs/envs/sudoku.md).  Difficulty = number of empty cells (RAGEN's
# 40/50/60% removal fractions); every puzzle has exactly one solution.
register_env(
    "Sudoku",
    version=0,
    env_key="sudoku",
    entry_point="ragen_envs.envs.sudoku:SudokuEnv",
    description="4x4 Sudoku, easy (6 empty cells), unique solution; moves checked by the rules.",
    presets={
        "4x4-Medium": ("4x4 Sudoku, medium (8 empty cells).", {"size": 4, "difficulty": "medium"}),
        "4x4-Hard": ("4x4 Sudoku, hard (9 empty cells).", {"size": 4, "difficulty": "hard"}),
        "9x9-Easy": (
            "9x9 Sudoku, easy (32 empty cells).",
            {"size": 9, "difficulty": "easy"},
            {"max_turns": 10, "max_actions_per_turn": 5},
        ),
        "9x9-Medium": (
            "9x9 Sudoku, medium (40 empty cells).",
            {"size": 9, "difficulty": "medium"},
            {"max_turns": 12, "max_actions_per_turn": 5},
        ),
        "9x9-Hard": (
            "9x9 Sudoku, hard (48 empty cells).",
            {"size": 9, "difficulty": "hard"},
            {"max_turns": 14, "max_actions_per_turn": 5},
        ),
    },
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 3},
)
