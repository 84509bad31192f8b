"""Registers ``ragen/Bandit-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

register_env(
    "Bandit",
    version=0,
    env_key="bandit",
    entry_point="ragen_envs.envs.bandit:BanditEnv",
    description="Two-armed bandit with meaningful arm names; pick the higher-mean arm.",
    presets={
        "Pairs": (
            "Bandit whose splits share the arm names but never a pairing: held-out instances are "
            "new combinations of known names.",
            {"split_by": "pairs"},
        ),
        "PairsAB": (
            "Bandit-Pairs with the arms labelled A and B; the answer is the letter "
            "(a multiple-choice format).",
            {"split_by": "pairs", "answer_with": "label"},
        ),
    },
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)
