"""The 2048 and RubiksCube ids: registered with presets and agent
defaults that fit their step limits, config and info schemas in force, golden first
observations pinned, the baselines behave as documented.

Runs against the ``ragen-envs`` wheel alone (reads only ``tests/data``).
"""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import ragen_envs
from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode

GOLDEN = json.loads(
    (Path(__file__).resolve().parents[1] / "data" / "golden_first_obs.json").read_text("utf-8")
)

IDS_2048 = ["ragen/2048-v0", "ragen/2048-Target64-v0", "ragen/2048-Target256-v0"]
IDS_CUBE = [
    "ragen/RubiksCube-v0",
    "ragen/RubiksCube-Depth2-v0",
    "ragen/RubiksCube-Depth3-v0",
    "ragen/RubiksCube-Depth5-v0",
    "ragen/RubiksCube-Depth8-v0",
    "ragen/RubiksCube-Scrambled-v0",
]


@pytest.mark.parametrize("env_id", IDS_2048 + IDS_CUBE)
def test_ids_registered_with_schemas_and_golden_entries(env_id: str) -> None:
    entry = ragen_envs.get_entry(env_id)
    assert entry.procedural and entry.version == 0
    defaults = ragen_envs.config_defaults(entry.env_key)
    config = {**defaults, **entry.kwargs}
    # The agent budget covers the env's step limit (2048) or the longest optimal solution (cube: 14).
    budget = entry.agent_defaults["max_turns"] * entry.agent_defaults["max_actions_per_turn"]
    assert budget >= (config["max_steps"] if entry.env_key == "game2048" else 14)
    assert GOLDEN[env_id]["version"] == entry.version and len(GOLDEN[env_id]["sha256"]) == 10
    env = ragen_envs.make(env_id)
    _, info = env.reset(seed=0)
    ragen_envs.validate_info(entry.env_key, info)
    with pytest.raises(jsonschema.ValidationError, match="no_such_key"):
        ragen_envs.validate_info(entry.env_key, {**info, "no_such_key": 1})
    with pytest.raises(ragen_envs.ConfigError, match="no_such_field"):
        ragen_envs.make(env_id, no_such_field=1)


def test_2048_baseline_is_not_exact_and_beats_random_on_the_base_id() -> None:
    env = ragen_envs.make("ragen/2048-v0", split="test")
    assert env.unwrapped.oracle_is_exact is False
    best = [run_episode(env, oracle_policy, seed=s) for s in range(20)]
    rand = [run_episode(env, make_random_policy(s), seed=s) for s in range(20)]
    assert sum(r.success for r in best) >= 18
    assert sum(r.infos[-1]["max_tile"] for r in best) > sum(r.infos[-1]["max_tile"] for r in rand)


def test_cube_oracle_scores_the_maximum_and_random_rarely_does() -> None:
    env = ragen_envs.make("ragen/RubiksCube-Depth5-v0", split="test")
    best = [run_episode(env, oracle_policy, seed=s) for s in range(30)]
    assert all(r.success and r.episode_return == 1.0 for r in best)
    assert all(len(r.actions) == r.infos[0]["optimal_distance"] for r in best)
    rand = [run_episode(env, make_random_policy(s), seed=s) for s in range(30)]
    assert sum(r.success for r in rand) < 10
