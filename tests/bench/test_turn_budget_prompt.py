"""The Sokoban instruction says the game stops after ``max_steps`` (100)
actions while the agent loop ends the episode after ``max_turns`` turns; the system
prompt now states the loop's budget, which is the one that binds."""

from __future__ import annotations

from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs
from tests.helpers.scripted import ScriptedPolicy


def test_sokoban_prompt_states_the_agent_loop_action_limit() -> None:
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>Up</answer>")
    cfg = RolloutConfig(max_turns=10, max_actions_per_turn=2)
    (record,) = RolloutEngine(policy, cfg).run(make_specs("ragen/Sokoban-v0", episodes=1))
    system = policy.requests[0].messages[0]["content"]
    assert "The game stops after 100 actions." in system  # the env's own limit, still true
    assert "The episode ends after 10 turns (at most 20 actions in all)" in system
    assert len(record.turns) <= 10
