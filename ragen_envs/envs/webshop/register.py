"""Registers ``ragen/WebShop-v0`` and its presets (imported by :mod:`ragen_envs._register`).

The agent-loop defaults (turns, actions per turn) are the ones the task is meant to be
played with; they are chosen so that the oracle can always finish within them.
"""

from __future__ import annotations

from ...registry import register_env

# WebShop (spec: docs/envs/webshop.md).  Data-backed: goals over a procedurally generated
# catalogue (3000 products, the same in every process) or the original WebShop files when
# the user has them.  9 turns as RAGEN's WebShop; the oracle needs at most 8 actions.
register_env(
    "WebShop",
    version=0,
    env_key="webshop",
    entry_point="ragen_envs.envs.webshop:WebShopEnv",
    description="Text web shop: search, page through results, pick options and buy what the instruction asks; "
    "published WebShop reward (generated catalogue).",
    presets={
        "Binary": (
            "WebShop with RAGEN's reward: 1 iff the purchase matches perfectly, else 0.",
            {"reward_mode": "binary"},
        ),
        "Calibrated": (
            "WebShop on the calibrated catalogue: search as hard as the published shop's (WebShop's rule "
            "baseline near the paper's 45.6 score / 9.6 % success).",
            {"catalog_variant": "calibrated"},
        ),
    },
    procedural=False,
    agent_defaults={"max_turns": 9, "max_actions_per_turn": 1},
)
