"""Rollout filtering (RAGEN-2 reward-variance filtering) on hand-made group scores."""

from __future__ import annotations

import numpy as np
import pytest

from ragen_train.filtering import FilterConfig, group_scores, select_groups

STDS = np.array([0.5, 0.0, 0.5, 0.25])


def test_top_p_linear_half() -> None:
    # Total 1.25; threshold 0.5*1.25 - 0.01 = 0.615: 0.5 (group 0) < 0.615, 0.5+0.5 (group 2) >= it.
    res = select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, top_p_mode="linear", eps=0.01))
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
    res = select_groups(np.array([0.2, 0.0, 0.0, 0.0]), FilterConfig(strategy="top_k_abs", value=2, include_zero=False))
    assert res.kept == [0]


def test_top_k_fraction_and_min_p_and_softmax() -> None:
    assert select_groups(STDS, FilterConfig(strategy="top_k", value=0.5)).kept == [0, 2]
    # Without zeros the fraction is of the 3 candidates: floor(0.5*3) = 1.
    assert select_groups(STDS, FilterConfig(strategy="top_k", value=0.5, include_zero=False)).kept == [0]
    assert select_groups(STDS, FilterConfig(strategy="min_p", value=0.5)).kept == [0, 2, 3]
    # softmax of [0.5, 0.5, 0.25, 0] = [0.2875, 0.2875, 0.2239, 0.1744]: cumulative 0.575 >= 0.5 after two.
    assert select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, top_p_mode="softmax")).kept == [0, 2]


def test_loss_scaling_by_kept_fraction() -> None:
    lin = select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, loss_scaling="linear"))
    sq = select_groups(STDS, FilterConfig(strategy="top_p", value=0.5, loss_scaling="sqrt"))
    assert lin.scale == pytest.approx(0.5) and sq.scale == pytest.approx(0.5 ** 0.5)


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
    section = FilterSection(strategy="top_k_abs", value=2.0, include_zero=False, loss_scaling="sqrt")
    assert asdict(FilterConfig.from_section(section)) == asdict(section)
