"""What a group's advantages say about Bandit's better arm, with shared and with
independent outcomes (docs/envs/README.md, "Group members and random outcomes").

Groups of 8; each member picks the risky arm with probability 1/2 (the safe arm pays 0.1,
the risky one 1.0 with probability ``p``, so it is the better arm at p = 0.25 and 0.5).
The quantity is the sum of the advantages of the risky pickers of a group, averaged over
groups: positive means the update moves toward the better arm.  With RAGEN's shared draw a
group sees one coin, and std-normalised GRPO is *negative* at p = 0.25 (about -1.73) and
zero at p = 0.5; with independent draws it is -0.37 and +1.33.  Dr. GRPO and RLOO stay
positive in all four cells.  The exact values are computed by enumeration with the
project's own estimators; the rewards of the Monte Carlo check come from the real env,
group members reset with ``options={"member": k}``.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

import ragen_envs
from ragen_train.advantages import dr_grpo, grpo, rloo

GROUP = 8
ESTIMATORS = {"grpo": grpo, "dr_grpo": dr_grpo, "rloo": rloo}


def _risky_sum(estimator, rewards: list[list[float]], risky: list[list[bool]]) -> np.ndarray:
    """Per group: the sum of the risky pickers' advantages under ``estimator``."""
    scores = torch.tensor([r for g in rewards for r in g], dtype=torch.float64)
    groups = torch.arange(len(rewards)).repeat_interleave(GROUP)
    adv, _ = estimator(scores, groups, torch.ones(len(scores), 1))
    picked = torch.tensor([x for g in risky for x in g])
    return (adv[:, 0].double() * picked).reshape(len(rewards), GROUP).sum(1).numpy()


def _exact(estimator, p: float, shared: bool) -> float:
    """Expectation by enumerating the pickers (k of 8) and the coins."""
    total = 0.0
    for k in range(GROUP + 1):
        pk = math.comb(GROUP, k) / 2**GROUP
        risky = [True] * k + [False] * (GROUP - k)
        if shared:
            cases = [(p, [1.0] * k), (1 - p, [0.0] * k)]
        else:
            cases = [
                (math.comb(k, j) * p**j * (1 - p) ** (k - j), [1.0] * j + [0.0] * (k - j))
                for j in range(k + 1)
            ]
        for prob, pays in cases:
            if prob == 0:
                continue
            rewards = pays + [0.1] * (GROUP - k)
            total += pk * prob * float(_risky_sum(estimator, [rewards], [risky])[0])
    return total


CELLS = list(itertools.product((0.25, 0.5), ("shared", "independent")))


def test_exact_expectations_match_the_published_simulation() -> None:
    got = {(p, o): _exact(grpo, p, o == "shared") for p, o in CELLS}
    assert got[(0.25, "shared")] == pytest.approx(-1.73, abs=0.01)
    assert got[(0.25, "independent")] == pytest.approx(-0.37, abs=0.01)
    # zero but for the 1e-6 added to the std: a won group has a larger std than a lost one
    assert got[(0.5, "shared")] == pytest.approx(0.0, abs=1e-4)
    assert got[(0.5, "independent")] == pytest.approx(1.33, abs=0.01)
    for name in ("dr_grpo", "rloo"):
        for p, o in CELLS:
            assert _exact(ESTIMATORS[name], p, o == "shared") > 0.02, (name, p, o)


@pytest.mark.parametrize(("p", "outcomes"), CELLS)
def test_env_groups_give_the_expected_advantages(p: float, outcomes: str) -> None:
    env = ragen_envs.make("ragen/Bandit-v0", risky_prob=p, outcomes=outcomes)
    base = env.unwrapped
    picks = np.random.default_rng(1234).random((2000, GROUP)) < 0.5
    rewards, risky = [], []
    for seed, row in enumerate(picks):
        group = []
        for k, pick in enumerate(row):
            env.reset(seed=seed, options={"member": k})
            group.append(env.step(base._risky if pick else base._steady)[1])
        rewards.append(group)
        risky.append([bool(x) for x in row])
    for name, estimator in ESTIMATORS.items():
        sums = _risky_sum(estimator, rewards, risky)
        exact = _exact(estimator, p, outcomes == "shared")
        se = sums.std(ddof=1) / math.sqrt(len(sums))
        assert abs(sums.mean() - exact) < 4 * se + 1e-9, (name, sums.mean(), exact, se)
