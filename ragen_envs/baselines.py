"""Reference policies that act directly on an environment: the oracle and the random baseline.

These act on the env's state (``env.unwrapped``), not on text, and are what the
``oracle`` and ``random`` back-ends of ``ragen_bench`` wrap.  :func:`run_episode` is
a minimal episode loop for tests and benchmarks; the real agent loop (prompts, parsing,
turns) lives in ``ragen_bench``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import gymnasium as gym
import numpy as np

from .core import TextEnv

#: A policy maps the env (for privileged baselines) and its last observation to actions.
EnvPolicy = Callable[[TextEnv, str], list[str]]


def oracle_policy(env: TextEnv, observation: str) -> list[str]:
    """The env's oracle: the next actions of an optimal policy (see ``TextEnv.oracle_actions``)."""
    return env.oracle_actions()


def make_random_policy(seed: int | None = None) -> EnvPolicy:
    """A policy that takes one uniformly random well-formed action per call.

    Randomness comes from its own ``numpy`` generator seeded with ``seed``.
    """
    rng = np.random.default_rng(seed)

    def policy(env: TextEnv, observation: str) -> list[str]:
        return [env.sample_action(rng)]

    return policy


@dataclass
class EpisodeResult:
    """Outcome of :func:`run_episode`.

    Attributes:
        seed: the reset seed.
        actions: every action sent to ``step``.
        rewards: the reward of each step.
        infos: the reset info followed by each step's info.
        terminated / truncated: the final flags.
        status: the final ``info["status"]``.
    """

    seed: int | None
    actions: list[str] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    infos: list[dict[str, Any]] = field(default_factory=list)
    observations: list[str] = field(default_factory=list)
    terminated: bool = False
    truncated: bool = False
    status: str = "running"

    @property
    def episode_return(self) -> float:
        """Sum of rewards."""
        return float(sum(self.rewards))

    @property
    def success(self) -> bool:
        """``info["success"]`` of the last step."""
        return bool(self.infos and self.infos[-1].get("success", False))


def run_episode(
    env: gym.Env,
    policy: EnvPolicy,
    seed: int | None = None,
    *,
    options: dict[str, Any] | None = None,
    max_policy_calls: int = 10_000,
) -> EpisodeResult:
    """Run one episode of ``policy`` on ``env`` (wrapped or not) until it ends.

    Args:
        env: a ragen environment.
        policy: called with ``(env.unwrapped, observation)``; returns actions to run in
            order (the episode stops as soon as it ends).
        seed: reset seed.
        max_policy_calls: safety bound on policy calls.

    Raises:
        RuntimeError: the policy returned no action while the episode was running, or
            the bound on policy calls was reached.
    """
    base: TextEnv = env.unwrapped  # type: ignore[assignment]
    obs, info = env.reset(seed=seed, options=options)
    result = EpisodeResult(seed=seed, infos=[info], observations=[obs])
    for _ in range(max_policy_calls):
        actions = policy(base, obs)
        if not actions:
            raise RuntimeError(f"policy returned no action for a running episode (seed {seed})")
        for action in actions:
            obs, reward, terminated, truncated, info = env.step(action)
            result.actions.append(action)
            result.rewards.append(float(reward))
            result.infos.append(info)
            result.observations.append(obs)
            if terminated or truncated:
                result.terminated, result.truncated = bool(terminated), bool(truncated)
                result.status = info["status"]
                return result
    raise RuntimeError(f"episode did not end within {max_policy_calls} policy calls (seed {seed})")
