"""Rollout filtering (RAGEN-2 reward-variance filtering) on hand-made group scores."""

from __future__ import annotations

import numpy as np
import pytest

from ragen_train.filtering import FilterConfig, group_scores, select_groups

STDS = np.array([0.5, 0.0, 0.5, 0.25])


def test_top_p_linear_half() -> None:
    # Total 1.25; threshold 0.5*1.25 - 0.01 = 0.615: 0.5 (group 0) < 0.615, 0.5+0.5 (group 2) >= it.
    res = select_groups(
        STDS, FilterConfig(strategy="top_p", value=0.5, top_p_mode="linear", eps=0.01)
    )
    assert res.kept == [0, 2]
    assert res.metrics["filter/kept_ratio"] == 0.5


def test_top_p_one_keeps_everything() -> None:
    assert select_groups(STDS, FilterConfig(strategy="top_p", value=1.0)).kept == [0, 1, 2, 3]


def test_all_zero_batch_is_empty_without_nan() -> None:
    res = select_groups(np.zeros(4), FilterConfig(strategy="top_p", value=0.9))
    assert res.kept == [] and res.scale == 0.0
    assert res.metrics["filter/empty"] == 1.0
    assert all(np.isfinite(v) for v in res.metrics.values())


def test_top_k_abs_excluding_zeros() -> None:
    res = select_groups(
        np.array([0.2, 0.0, 0.0, 0.0]),
        FilterConfig(strategy="top_k_abs", value=2, include_zero=False),
    )
    assert res.kept == [0]


def test_top_k_fraction_and_min_p_and_softmax() -> None:
    assert select_groups(STDS, FilterConfig(strategy="top_k", value=0.5)).kept == [0, 2]
    # Without zeros the fraction is of the 3 candidates: floor(0.5*3) = 1.
    assert select_groups(
        STDS, FilterConfig(strategy="top_k", value=0.5, include_zero=False)
    ).kept == [0]
    assert select_groups(STDS, FilterConfig(strategy="min_p", value=0.5)).kept == [0, 2, 3]
    # softmax of [0.5, 0.5, 0.25, 0] = [0.2875, 0.2875, 0.2239, 0.1744]: cumulative 0.575 >= 0.5 after two.
    assert select_groups(
        STDS, FilterConfig(strategy="top_p", value=0.5, top_p_mode="softmax")
    ).kept == [0, 2]


def test_loss_scaling_by_kept_fraction() -> None:
    lin = select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, loss_scaling="linear"))
    sq = select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, loss_scaling="sqrt"))
    assert lin.scale == pytest.approx(0.5) and sq.scale == pytest.approx(0.5**0.5)


def test_group_scores_std_is_population_std() -> None:
    s = group_scores({0: [1.0, 0.0], 1: [0.3, 0.3]}, "reward_std")
    assert s.tolist() == pytest.approx([0.5, 0.0])
    assert group_scores({0: [1.0, 0.0]}, "reward_mean").tolist() == [0.5]


def test_bad_config_is_rejected() -> None:
    with pytest.raises(ValueError, match="filter.strategy"):
        FilterConfig(strategy="top_q")
    with pytest.raises(ValueError, match="filter.metric"):
        FilterConfig(metric="variance")


def test_config_section_and_runtime_filter_agree() -> None:
    """``algorithm.filter`` (mutable config section) and FilterConfig (frozen, validated) have the
    same fields and defaults, and one converts into the other."""
    from dataclasses import asdict

    from ragen_train.config import FilterSection

    assert asdict(FilterSection()) == asdict(FilterConfig())
    section = FilterSection(
        strategy="top_k_abs", value=2.0, include_zero=False, loss_scaling="sqrt"
    )
    assert asdict(FilterConfig.from_section(section)) == asdict(section)


def test_one_nonfinite_reward_does_not_empty_a_filtered_batch() -> None:
    """A NaN reward (a sample the trainer drops) no longer poisons its group's
    score, so ``top_p < 1`` keeps the informative groups and every metric stays finite."""
    nan = float("nan")
    values = {0: [1, nan, 0, 0], 1: [1, 0, 0, 0], 2: [1, 1, 0, 0], 3: [0, 0, 0, 0]}
    scores = group_scores(values, "reward_std")
    # Group 0 is scored from its three finite rewards [1, 0, 0]: population std sqrt(2)/3.
    assert scores.tolist() == pytest.approx([2**0.5 / 3, 0.4330127, 0.5, 0.0])
    res = select_groups(scores, FilterConfig(value=0.9))
    # Total 1.4044; threshold 0.9 * 1.4044 - 0.01 = 1.254: 0.5 + 0.4714 < it, + 0.4330 >= it.
    assert res.kept == [0, 1, 2]
    assert res.metrics["filter/empty"] == 0.0
    assert all(np.isfinite(v) for v in res.metrics.values())
    assert select_groups(scores, FilterConfig(strategy="min_p", value=0.9)).kept == [
        0,
        2,
    ]  # >= 0.45
    # Fewer than two finite rewards: no contrast, score 0 (and no NaN anywhere).
    few = group_scores({0: [nan, 1.0, None], 1: [nan, nan], 2: []}, "reward_std")
    assert few.tolist() == [0.0, 0.0, 0.0]
    assert group_scores({0: [nan, 3.0], 1: [nan]}, "reward_mean").tolist() == [3.0, 0.0]
    # A non-finite score handed to select_groups directly counts as 0.
    assert all(
        np.isfinite(v)
        for v in select_groups(np.array([nan, 0.5]), FilterConfig(value=0.9)).metrics.values()
    )


def test_one_nonfinite_reward_counts_only_surviving_episodes_in_the_trainer_and_backends() -> None:
    """The callers: the native trainer scores a group from the episodes that
    survived ``build_samples`` (``alive``), the external back-ends from those with a finite return."""
    from types import SimpleNamespace

    from ragen_train.filtering import group_values

    def rec(g: int, e: int, ret: float, tokens: int = 5) -> SimpleNamespace:
        return SimpleNamespace(
            group=g, episode_index=e, episode_return=ret, completion_tokens=tokens
        )

    records = [
        rec(0, 0, 1.0),
        rec(0, 1, float("nan"), 9),
        rec(0, 2, 0.0),
        rec(1, 3, 1.0),
        rec(1, 4, 0.0),
    ]
    assert group_values(records, "reward_std") == {0: [1.0, 0.0], 1: [1.0, 0.0]}
    assert group_values(records, "length") == {0: [5.0, 5.0], 1: [5.0, 5.0]}
    # Episode 3 was dropped for another reason (e.g. no token ids): it does not count either.
    alive = {(0, 0), (0, 2), (1, 4)}
    assert group_values(records, "reward_std", alive=alive) == {0: [1.0, 0.0], 1: [0.0]}
    with pytest.raises(ValueError, match="entropy"):
        group_values(records, "entropy")


def test_zero_variance_means_one_thing_for_advantages_and_filter() -> None:
    """One tolerance (CONSTANT_GROUP_TOL on the population std) decides both
    "all advantages 0" and "zero score" (counted in filter/zero_score_groups, removed by
    include_zero=False) — tested on both sides of the tolerance."""
    import torch

    from ragen_train.advantages import CONSTANT_GROUP_TOL, group_advantages

    assert CONSTANT_GROUP_TOL == 1e-6
    groups = {
        0: [0.6667, 0.66670001, 0.6667],  # float noise: constant on both sides
        1: [0.0, 1.5e-6, 0.0],  # population std 7.1e-7 <= tol, unbiased 8.7e-7
        2: [0.0, 2e-6, 0.0],  # population std 9.4e-7 <= tol, unbiased 1.15e-6 > tol
        3: [0.0, 1e-5, 0.0],  # std 4.7e-6 > tol: real (tiny) signal on both sides
        4: [1.0, 0.0, 0.0],  # plain signal
    }
    scores = group_scores(groups, "reward_std")
    flat = [x for g in sorted(groups) for x in groups[g]]
    gid = [g for g in sorted(groups) for _ in groups[g]]
    adv, _ = group_advantages(torch.tensor(flat, dtype=torch.float64), torch.tensor(gid))
    constant_by_adv = [bool((adv[torch.tensor(gid) == g] == 0).all()) for g in sorted(groups)]
    assert constant_by_adv == [True, True, True, False, False]
    assert [s == 0.0 for s in scores] == constant_by_adv
    res = select_groups(scores, FilterConfig(include_zero=False))
    assert res.metrics["filter/zero_score_groups"] == 3.0
    assert res.kept == [3, 4]
    # A constant group never contributes to top_p's cumulative score either.
    assert select_groups(scores, FilterConfig(value=0.5, eps=0.0)).kept == [4]
