"""Resets per second and steps per second of every registered id (pytest-benchmark).

Run with ``pytest benchmarks/ --benchmark-only`` (see ``benchmarks/README.md``).  Not
collected by the default ``pytest`` run (``testpaths = ["tests"]``).

* ``test_reset``: ``env.reset(seed=k)`` with a fresh seed each call (instance
  generation included, as in training where every episode is a new seed).
* ``test_step``: one ``env.step(action)`` on a pre-reset env with a *valid* action: the
  oracle's next action (its plan is computed outside the timed region), or a random
  well-formed action where the env has no oracle.  When an episode ends the env is
  reset, also outside the timed region (``benchmark.pedantic`` with a ``setup``).

Figures are per call of the unwrapped env (no Gymnasium checker wrappers), in
seconds; resets/s and steps/s are ``1 / mean``.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

import numpy as np
import pytest

import ragen_envs

ALL_IDS = [e.id for e in ragen_envs.list_envs()]

#: Rounds of the step benchmark per id (each round is one timed step).
STEP_ROUNDS = int(os.environ.get("RAGEN_BENCH_STEP_ROUNDS", "2000"))


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_reset(benchmark: Any, env_id: str) -> None:
    env = ragen_envs.make(env_id).unwrapped
    seeds = itertools.count()
    benchmark.group = "reset"
    benchmark.extra_info["env_id"] = env_id
    obs, _ = benchmark(lambda: env.reset(seed=next(seeds)))
    assert isinstance(obs, str)


class _ValidActions:
    """Keeps an env running with valid actions; all bookkeeping happens in ``setup``."""

    def __init__(self, env_id: str) -> None:
        self.env = ragen_envs.make(env_id).unwrapped
        self.rng = np.random.default_rng(0)
        self.seeds = itertools.count()
        self.plan: list[str] = []
        self.done = True
        self.invalid = 0
        self.steps = 0

    def _next_action(self) -> str:
        if not self.plan:
            try:
                self.plan = list(self.env.oracle_actions())
            except NotImplementedError:
                self.plan = []
        if not self.plan:
            self.plan = [self.env.sample_action(self.rng)]
        return self.plan.pop(0)

    def setup(self) -> tuple[tuple[str], dict[str, Any]]:
        if self.done:
            self.env.reset(seed=next(self.seeds))
            self.plan = []
        return (self._next_action(),), {}

    def step(self, action: str) -> None:
        _, _, terminated, truncated, info = self.env.step(action)
        self.done = terminated or truncated
        self.invalid += not info["action_is_valid"]
        self.steps += 1


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_step(benchmark: Any, env_id: str) -> None:
    runner = _ValidActions(env_id)
    benchmark.group = "step"
    benchmark.extra_info["env_id"] = env_id
    benchmark.pedantic(runner.step, setup=runner.setup, rounds=STEP_ROUNDS, warmup_rounds=10)
    assert runner.invalid == 0, f"{runner.invalid} of {runner.steps} benchmark actions were invalid"
