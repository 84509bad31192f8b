"""Registers ``ragen/MetaMathQA-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# MetaMathQA (spec: docs/envs/metamathqa.md).  Data-backed: bundled template problems
# written by us (MetaMathQA / GSM8K record formats); the full data sets load through
# ragen_envs.data when the user has the files or the hub.
register_env(
    "MetaMathQA",
    version=0,
    env_key="metamathqa",
    entry_point="ragen_envs.envs.metamathqa:MetaMathQAEnv",
    description="Math word problems (MetaMathQA format); final answer extracted and checked by math-verify.",
    presets={
        "GSM8K": (
            "The same env over GSM8K-format data ('#### X' gold answers).",
            {"data_source": "bundled:math-templates-gsm8k", "data_format": "gsm8k"},
        ),
        "MultiAttempt": (
            "Three attempts per question; attempt k earns 0.5**k (RAGEN's 1/2**k).",
            {"max_attempts": 3, "max_steps": 5},
            {"max_turns": 3, "max_actions_per_turn": 1},
        ),
    },
    procedural=False,
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)
