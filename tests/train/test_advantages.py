"""Advantage estimators against hand-computed values (the trainer issue's must-show)."""

from __future__ import annotations

import math

import pytest
import torch

from ragen_train.advantages import (
    ADVANTAGE_ESTIMATORS,
    bilevel_gae,
    dr_grpo,
    gae,
    get_estimator,
    grpo,
    rloo,
)

ONE = torch.ones((1, 1))


def g(scores, groups):
    s = torch.tensor(scores, dtype=torch.float64)
    gid = torch.tensor(groups)
    return s, gid, torch.ones((len(scores), 1))


def test_grpo_group_and_singleton() -> None:
    # Group [1, 0, 0]: mean 1/3, unbiased std sqrt(1/3) -> (1-1/3)/0.57735 = 1.1547, -0.5774.
    # eps = 1e-6 is added to the std, so the values differ from the exact ratio at 1e-6.
    adv, ret = grpo(*g([1, 0, 0, 0.7], [0, 0, 0, 1]))
    assert adv[:, 0].tolist() == pytest.approx(
        [1.1547, -0.5774, -0.5774, 0.0], abs=1e-4
    )  # 4-decimal values from the issue
    assert adv[0, 0].item() == pytest.approx((2 / 3) / (math.sqrt(1 / 3) + 1e-6), abs=1e-6)
    assert adv[3, 0].item() == 0.0  # a singleton group gives 0, not NaN
    assert torch.equal(adv, ret)


def test_grpo_two_prompts() -> None:
    adv, _ = grpo(*g([1, 0, 1, 1], [0, 0, 1, 1]))
    assert adv[:, 0].tolist() == pytest.approx(
        [0.7071, -0.7071, 0.0, 0.0], abs=1e-4
    )  # 4-decimal values from the issue


def test_constant_group_with_float_noise_is_exactly_zero() -> None:
    adv, _ = grpo(*g([0.3, 0.3, 0.3, 0.3000001], [0, 0, 0, 0]))
    assert adv.abs().max().item() == 0.0  # RAGEN would give +-0.87 here (std + 1e-6)


def test_dr_grpo_and_rloo() -> None:
    adv, _ = dr_grpo(*g([1, 0, 0], [0, 0, 0]))
    assert adv[:, 0].tolist() == pytest.approx([2 / 3, -1 / 3, -1 / 3])
    adv, _ = rloo(*g([1, 0, 0], [0, 0, 0]))
    # s_i - mean of the others: 1 - 0, 0 - 0.5, 0 - 0.5
    assert adv[:, 0].tolist() == pytest.approx([1.0, -0.5, -0.5])
    adv, _ = rloo(*g([0.5], [0]))
    assert adv.item() == 0.0


def test_nan_reward_is_masked_and_warns() -> None:
    with pytest.warns(RuntimeWarning, match="NaN or missing reward"):
        adv, _ = grpo(*g([1, 0, float("nan"), 0], [0, 0, 0, 0]))
    assert adv[2, 0].item() == 0.0
    # The group statistics ignore the NaN: [1, 0, 0] as above.
    assert adv[0, 0].item() == pytest.approx(1.1547, abs=1e-4)  # 4-decimal values from the issue
    assert not torch.isnan(adv).any()


def test_broadcast_over_mask() -> None:
    mask = torch.tensor([[0, 1, 1], [1, 1, 0]], dtype=torch.float32)
    adv, _ = grpo(torch.tensor([1.0, 0.0], dtype=torch.float64), torch.tensor([0, 0]), mask)
    assert adv.flatten().tolist() == pytest.approx(
        [0, 0.7071, 0.7071, -0.7071, -0.7071, 0], abs=1e-4
    )  # 4-decimal values from the issue


def test_gae_three_tokens_by_hand() -> None:
    # gamma 0.9, lambda 0.8, rewards [0, 0, 1], values [0.5, 0.6, 0.7]:
    # d2 = 1 - 0.7 = 0.3; A2 = 0.3
    # d1 = 0.9*0.7 - 0.6 = 0.03; A1 = 0.03 + 0.72*0.3 = 0.246
    # d0 = 0.9*0.6 - 0.5 = 0.04; A0 = 0.04 + 0.72*0.246 = 0.21712
    r = torch.tensor([[0.0, 0.0, 1.0]])
    v = torch.tensor([[0.5, 0.6, 0.7]])
    m = torch.ones((1, 3))
    adv, ret = gae(r, v, m, gamma=0.9, lam=0.8, whiten_advantages=False)
    assert adv[0].tolist() == pytest.approx([0.21712, 0.246, 0.3], abs=1e-6)
    assert ret[0].tolist() == pytest.approx([0.71712, 0.846, 1.0], abs=1e-6)


def test_gae_skips_positions_off_the_mask() -> None:
    # The same three generated tokens with an observation token between them.
    r = torch.tensor([[0.0, 0.0, 9.9, 1.0]])
    v = torch.tensor([[0.5, 0.6, 5.0, 0.7]])
    m = torch.tensor([[1.0, 1.0, 0.0, 1.0]])
    adv, _ = gae(r, v, m, gamma=0.9, lam=0.8, whiten_advantages=False)
    assert adv[0].tolist() == pytest.approx([0.21712, 0.246, 0.0, 0.3], abs=1e-6)


def test_gae_whitening_has_zero_mean_unit_variance() -> None:
    r = torch.tensor([[0.0, 0.0, 1.0], [0.0, 0.0, 0.0]])
    v = torch.zeros((2, 3))
    m = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]])
    adv, _ = gae(r, v, m)
    vals = adv[m > 0]
    assert vals.mean().item() == pytest.approx(0.0, abs=1e-6)
    assert vals.var(unbiased=True).item() == pytest.approx(1.0, abs=1e-4)
    assert adv[1, 2].item() == 0.0


def test_bilevel_gae_two_turns_by_hand() -> None:
    # Turn 0 at positions 0-1, an observation token at 2, turn 1 at 3-4.
    # Turn rewards R = [0, 1]; turn values V = [V(1), V(4)] = [0.4, 0.6]; turn_gamma 0.9, lambda 1:
    #   A_1 = 1 - 0.6 = 0.4;  A_0 = 0.9*0.6 - 0.4 + 0.9*0.4 = 0.5
    # Token level (gamma 1): turn 0 targets A_0 + V_0 = 0.9 at position 1:
    #   A(1) = 0.9 - 0.4 = 0.5;  A(0) = 0.4 - 0.2 + 0.5 = 0.7
    # Turn 1 target A_1 + V_1 = 1.0 at position 4: A(4) = 0.4;  A(3) = 0.6 - 0.5 + 0.4 = 0.5
    r = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]])
    v = torch.tensor([[0.2, 0.4, 9.0, 0.5, 0.6]])
    m = torch.tensor([[1.0, 1.0, 0.0, 1.0, 1.0]])
    turns = torch.tensor([[0, 0, -1, 1, 1]])
    adv, ret = bilevel_gae(
        r, v, m, turns, gamma=1.0, lam=1.0, turn_gamma=0.9, whiten_advantages=False
    )
    assert adv[0].tolist() == pytest.approx([0.7, 0.5, 0.0, 0.5, 0.4], abs=1e-6)
    assert ret[0].tolist() == pytest.approx([0.9, 0.9, 0.0, 1.0, 1.0], abs=1e-6)


def test_registry() -> None:
    assert set(ADVANTAGE_ESTIMATORS) >= {"gae", "grpo", "dr_grpo", "rloo", "bilevel_gae"}
    with pytest.raises(KeyError, match="unknown advantage estimator"):
        get_estimator("remax")
    assert not math.isnan(get_estimator("grpo")(*g([1.0], [0]))[0].item())


def test_zero_variance_tolerance_is_the_population_std_for_grpo_and_rloo() -> None:
    """[0.6667, 0.66670001, 0.6667] is constant; a group whose
    unbiased std is just above 1e-6 but population std below it is constant for GRPO and RLOO
    alike; one above the tolerance is not."""
    from ragen_train.advantages import group_advantages, rloo

    for values, constant in (
        ([0.6667, 0.66670001, 0.6667], True),
        ([0.0, 2e-6, 0.0], True),
        ([0.0, 1e-5, 0.0], False),
    ):
        s = torch.tensor(values, dtype=torch.float64)
        g = torch.zeros(3, dtype=torch.long)
        adv, _ = group_advantages(s, g)
        loo, _ = rloo(s, g, torch.ones((3, 1)))
        assert bool((adv == 0).all()) is constant, values
        assert bool((loo == 0).all()) is constant, values
