"""An env that ends an episode itself with status ``env_error`` (Lean's verifier is
unreachable) has its one-line reason copied into the episode record's ``error``."""

from __future__ import annotations

import socket

from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs
from tests.helpers.scripted import ScriptedPolicy


def _closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_env_error_reason_from_the_env_reaches_the_episode_record() -> None:
    url = f"http://127.0.0.1:{_closed_port()}"
    policy = ScriptedPolicy(lambda e, t: "<think>x</think><answer>norm_num</answer>")
    engine = RolloutEngine(policy, RolloutConfig(max_turns=2, max_actions_per_turn=1))
    (record,) = engine.run(
        make_specs("ragen/Lean-v0", episodes=1, env_config={"verifier": url, "max_retries": 0})
    )
    assert record.status == "env_error"
    assert record.error and "127.0.0.1" in record.error, record.error
