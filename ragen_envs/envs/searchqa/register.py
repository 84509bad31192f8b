"""Registers ``ragen/SearchQA-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# SearchQA (spec: docs/envs/searchqa.md).  Data-backed: our bundled country passages and
# questions (CC0); HotpotQA / Natural Questions files load through ragen_envs.envs.searchqa.questions,
# and a Search-R1 / RAGEN retrieval server plugs in with retriever="http".  5 turns as in
# RAGEN-2's SearchQA runs; the oracle needs at most 3 actions.
register_env(
    "SearchQA",
    version=0,
    env_key="searchqa",
    entry_point="ragen_envs.envs.searchqa:SearchQAEnv",
    description="Answer a question with search[query] / finish[answer] over a BM25 index (bundled country passages) "
    "or a retrieval server; EM/F1 reward.",
    procedural=False,
    agent_defaults={"max_turns": 5, "max_actions_per_turn": 1},
)
