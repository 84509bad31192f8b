"""Found by a fresh-clone check (2026-12-02): ``--seed -1`` crashed ``ragen-bench run``
with a traceback, and an env whose ``reset`` raised went back into the engine's pool,
leaving gymnasium's passive checker broken for every later episode on that env."""

from __future__ import annotations

import pytest

from ragen_bench.policies import make_policy
from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine, make_specs


def test_negative_seed_is_refused_before_any_episode() -> None:
    with pytest.raises(ValueError, match="seed must be >= 0"):
        make_specs("ragen/FrozenLake-v0", episodes=4, seed=-1)
    with pytest.raises(ValueError, match="group_size must be >= 1"):
        make_specs("ragen/FrozenLake-v0", episodes=4, group_size=0)


def test_env_whose_reset_raised_is_not_reused_for_later_episodes() -> None:
    specs = [EpisodeSpec(index=i, env_id="ragen/FrozenLake-v0", env_config={}, seed=seed, group=i, member=0)
             for i, seed in enumerate((-1, 0, 1, 2))]
    engine = RolloutEngine(make_policy("oracle", None), RolloutConfig(max_turns=5, max_actions_per_turn=2),
                           max_parallel=1)
    records = engine.run(specs)
    assert records[0].status == "env_error" and "Seed" in (records[0].error or "")
    assert [r.status for r in records[1:]] == ["success"] * 3, [(r.status, r.error) for r in records[1:]]


def test_unreachable_lean_verifier_is_found_by_preflight_with_the_fix() -> None:
    import socket

    from ragen_bench.preflight import PreflightError, preflight

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(PreflightError) as err:
        preflight("ragen/Lean-v0", {"verifier": f"http://127.0.0.1:{port}", "max_retries": 0}, 0, None, None)
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "--env-config verifier=" in message, message
