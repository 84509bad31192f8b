"""Registration of ``ragen/Lean-v0`` and its presets (imported by ``ragen_envs._register``).

Agent defaults follow RAGEN's Lean run (RAGEN's config/envs.yaml ``_7_lean``: 15 turns, 4 actions
per turn); max_steps 100 is RAGEN's Lean ``max_steps``.
"""

from __future__ import annotations

from ...registry import register_env

register_env(
    "Lean",
    version=0,
    env_key="lean",
    entry_point="ragen_envs.envs.lean:LeanEnv",
    description="Prove a miniF2F theorem in Lean 4 one tactic per action, checked by a Kimina Lean Server, "
    "a Lean REPL or a replay of recorded answers.",
    presets={
        "Short": (
            "Lean with a short budget: 20 steps, 5 turns of up to 4 tactics.",
            {"max_steps": 20},
            {"max_turns": 5, "max_actions_per_turn": 4},
        ),
        "Sparse": (
            "Lean with only the proof-complete reward and the step cost (no +1 / -1 shaping).",
            {"accepted_reward": 0.0, "rejected_reward": 0.0, "timeout_reward": 0.0},
        ),
    },
    procedural=False,
    agent_defaults={"max_turns": 15, "max_actions_per_turn": 4},
)
