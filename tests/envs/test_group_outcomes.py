"""Members of a group share the instance and draw their own random outcomes.

``reset(seed=s, options={"member": k})`` of an env with random transitions (Bandit's risky
payoff, FrozenLake's slips, 2048's new tiles) builds the same instance for every ``k`` and
draws the outcomes from a stream keyed by ``(s, k)``; ``outcomes="shared"`` keeps RAGEN's
behaviour, where the instance's stream goes on and members who act alike see the same
outcomes.  Plain ``reset(seed=s)`` is unchanged (the golden files pin it).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

import ragen_envs
from ragen_bench.rollout import RolloutConfig, RolloutEngine, make_specs
from tests.helpers.scripted import ScriptedPolicy

GROUP = 8


def _risky_payoffs(seed: int, outcomes: str, members: int = GROUP) -> list[float]:
    """Each member of group ``seed`` pulls the risky arm once: the rewards."""
    env = ragen_envs.make("ragen/Bandit-v0", outcomes=outcomes, risky_prob=0.5)
    first = None
    rewards = []
    for k in range(members):
        obs, _ = env.reset(seed=seed, options={"member": k})
        first = first or obs
        assert obs == first  # one instance for the whole group
        _, reward, *_ = env.step(env.unwrapped._risky)
        rewards.append(reward)
    return rewards


def test_members_share_the_instance_and_draw_independent_payoffs() -> None:
    groups = [_risky_payoffs(seed, "independent") for seed in range(300)]
    mixed = sum(len(set(g)) > 1 for g in groups)
    # 8 independent fair coins agree with probability 2 / 2**8: about 2 of 300 groups.
    assert mixed >= 290, mixed
    wins = sum(r == 1.0 for g in groups for r in g) / (300 * GROUP)
    assert 0.46 < wins < 0.54, wins


def test_shared_outcomes_keep_ragens_one_draw_per_group() -> None:
    groups = [_risky_payoffs(seed, "shared") for seed in range(300)]
    assert all(len(set(g)) == 1 for g in groups)  # 300 of 300: everyone won or lost together
    assert 100 < sum(g[0] == 1.0 for g in groups) < 200


def test_plain_reset_draws_as_before() -> None:
    """No member option: the instance's stream continues, with or without the new field."""
    for outcomes in ("independent", "shared"):
        env = ragen_envs.make("ragen/Bandit-v0", outcomes=outcomes, risky_prob=0.5)
        got = []
        for seed in range(40):
            env.reset(seed=seed)
            got.append(env.step(env.unwrapped._risky)[1])
        assert got == _shared_reference(), outcomes


def _shared_reference() -> list[float]:
    env = ragen_envs.make("ragen/Bandit-v0", outcomes="shared", risky_prob=0.5)
    out = []
    for seed in range(40):
        env.reset(seed=seed, options={"member": 3})
        out.append(env.step(env.unwrapped._risky)[1])
    return out


_CHILD = """
import json, sys, ragen_envs
out = {}
for env_id, action in (("ragen/Bandit-v0", None), ("ragen/FrozenLake-Slippery-v0", "Down")):
    env = ragen_envs.make(env_id)
    rows = []
    for seed in range(6):
        for k in range(4):
            env.reset(seed=seed, options={"member": k})
            a = action or env.unwrapped._risky
            rows.append([env.step(a)[1] for _ in range(1 if action is None else 5)
                         if env.unwrapped._live or action is None])
    out[env_id] = rows
print(json.dumps(out))
"""


def test_member_outcomes_are_the_same_in_any_process() -> None:
    runs = [
        json.loads(
            subprocess.run(
                [sys.executable, "-c", _CHILD],
                capture_output=True,
                text=True,
                check=True,
                env={"PYTHONHASHSEED": str(h), **_env()},
            ).stdout
        )
        for h in (0, 12345)
    ]
    assert runs[0] == runs[1]


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}


@pytest.mark.parametrize("env_id", ["ragen/FrozenLake-Slippery-v0", "ragen/2048-v0"])
def test_members_of_other_stochastic_envs_diverge_only_in_outcomes(env_id: str) -> None:
    env = ragen_envs.make(env_id)
    base = env.unwrapped
    actions = ["Down", "Right", "Down", "Right", "Down", "Right"]
    if "2048" in env_id:
        actions = ["Left", "Up", "Right", "Down"] * 3

    def play(k: int, outcomes: str) -> tuple[str, list[str]]:
        base.config["outcomes"] = outcomes
        first, _ = env.reset(seed=7, options={"member": k})
        seen = []
        for a in actions:
            if not base._live:
                break
            seen.append(env.step(a)[0])
        return first, seen

    shared = [play(k, "shared") for k in range(6)]
    independent = [play(k, "independent") for k in range(6)]
    assert len({first for first, _ in shared + independent}) == 1  # one instance
    assert len({tuple(s) for _, s in shared}) == 1  # same actions, same outcomes
    assert len({tuple(s) for _, s in independent}) > 1  # own outcomes per member


def test_rollout_engine_gives_each_member_its_index() -> None:
    """Through the harness: every member answers label A; a group's rewards vary only
    when outcomes are independent (A is the risky arm in about half the instances)."""
    policy = ScriptedPolicy(lambda e, t: "<think>a</think><answer>A</answer>")
    engine = RolloutEngine(policy, RolloutConfig(max_turns=1, max_actions_per_turn=1))

    def spread(outcomes: str) -> int:
        specs = make_specs(
            "ragen/Bandit-PairsAB-v0",
            episodes=40 * GROUP,
            group_size=GROUP,
            env_config={"outcomes": outcomes, "risky_prob": 0.5},
        )
        recs = engine.run(specs)
        by_group: dict[int, set[float]] = {}
        for r in recs:
            by_group.setdefault(r.group, set()).add(r.episode_return)
        return sum(len(v) > 1 for v in by_group.values())

    assert spread("shared") == 0
    assert spread("independent") >= 12  # ~20 of 40 groups have A risky; ~all of those vary


def test_member_option_is_checked() -> None:
    env = ragen_envs.make("ragen/Bandit-v0")
    for bad in (-1, 1.0, "0", True):
        with pytest.raises(ValueError, match="member"):
            env.reset(seed=0, options={"member": bad})
    with pytest.raises(ragen_envs.ConfigError, match="outcomes"):
        ragen_envs.make("ragen/Bandit-v0", outcomes="per-group")
