"""Registers ``ragen/Countdown-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

register_env(
    "Countdown",
    version=0,
    env_key="countdown",
    entry_point="ragen_envs.envs.countdown:CountdownEnv",
    description="Countdown: combine 3-4 numbers with + - * / to reach the target (one answer).",
    presets={
        "Three": ("Countdown with exactly 3 numbers.", {"count_range": [3, 3]}),
        "Four": ("Countdown with exactly 4 numbers.", {"count_range": [4, 4]}),
    },
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)
