"""Privileged baseline policies: the environment's oracle and a uniform random policy.

They read the environment through ``PolicyRequest.env`` and answer in the agent
protocol's text format (``<think>…</think><answer>a || b</answer>``), so they go through
exactly the same parsing and stepping as a language model.
"""

from __future__ import annotations

import numpy as np

from ragen_envs.parsing import format_answer

from ..types import Generation, PolicyRequest, SamplingParams
from .base import Policy


class _EnvPolicy(Policy):
    """Base of the env-reading baselines.

    Args:
        think: the text of the think block (default ``"<name> baseline"``); ``None`` is
            the default.  Demonstrations for SFT use one neutral text for every baseline
            so that it does not reveal which policy acted.
    """

    privileged = True
    #: Episodes alive at once by default (the rollout engine's ``max_parallel``): enough to
    #: keep the loop busy, few enough that finished episodes are written from the first
    #: second (1,024 alive at once wrote nothing for 10 s, and ran 1.7x slower).
    max_batch_size = 64
    max_concurrency = 1
    think: str | None = None

    def _actions(self, request: PolicyRequest) -> list[str]:  # pragma: no cover - abstract
        raise NotImplementedError

    async def generate(
        self, requests: list[PolicyRequest], params: SamplingParams
    ) -> list[Generation]:
        out = []
        for req in requests:
            if req.env is None:
                raise ValueError(f"the {self.name} baseline needs PolicyRequest.env")
            actions = self._actions(req)[: max(1, req.max_actions)]
            think = (self.think or f"{self.name} baseline") if req.enable_think else None
            text = format_answer(actions, think)
            out.append(Generation(text=text, finish_reason="stop"))
        return out


class OraclePolicy(_EnvPolicy):
    """Plays ``env.unwrapped.oracle_actions()``: the env's optimal policy (upper bound)."""

    name = "oracle"

    def __init__(self, think: str | None = None):
        self.think = think

    def _actions(self, request: PolicyRequest) -> list[str]:
        actions = request.env.unwrapped.oracle_actions()
        if not actions:
            raise RuntimeError("the oracle returned no action for a running episode")
        return actions


class RandomPolicy(_EnvPolicy):
    """Takes ``max_actions`` uniformly random well-formed actions per turn.

    Args:
        seed: seed of the policy's randomness.  Turn ``t`` of episode ``i`` draws from
            ``numpy.random.default_rng([seed, i, t])``, independent of the env's
            generator and of the order in which requests are batched.
    """

    name = "random"

    def __init__(self, seed: int = 0, think: str | None = None):
        self.seed = int(seed)
        self.think = think

    def _actions(self, request: PolicyRequest) -> list[str]:
        env = request.env.unwrapped
        rng = np.random.default_rng([self.seed, request.episode_index, request.turn])
        return [env.sample_action(rng) for _ in range(max(1, request.max_actions))]
