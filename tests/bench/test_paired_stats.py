"""Paired before/after statistics: the exact McNemar test, the paired
bootstrap, and the real-model script's paired comparison on per-episode outcomes."""

from __future__ import annotations

import pytest

from ragen_bench.stats import mcnemar_exact, paired_bootstrap_diff
from tests.helpers.scripts import load_script


def _script():
    return load_script("examples/real_model_run.py")


@pytest.mark.parametrize(
    "b,c,want",
    [
        # By hand: n = 10 discordant pairs, X ~ Bin(10, 1/2); P[X <= 1] = (1 + 10) / 1024.
        (1, 9, 22 / 1024),
        (9, 1, 22 / 1024),
        # P[X <= 0] for n = 6: 1/64, two-sided 2/64.
        (0, 6, 2 / 64),
        # Balanced: 2 P[X <= 5] = 1276/1024 > 1, capped.
        (5, 5, 1.0),
        (0, 0, 1.0),
        # n = 20, k = 5: sum_{i<=5} C(20, i) = 21,700; 2 * 21,700 / 2^20.
        (5, 15, 2 * 21_700 / 2**20),
    ],
)
def test_mcnemar_exact_matches_hand_computed_binomial_tails(b: int, c: int, want: float) -> None:
    assert mcnemar_exact(b, c) == pytest.approx(want, rel=1e-12)


def test_mcnemar_exact_rejects_negative_counts() -> None:
    with pytest.raises(ValueError, match=">= 0"):
        mcnemar_exact(-1, 3)


def test_paired_bootstrap_centres_on_the_mean_difference_and_brackets_it() -> None:
    before = [0, 0, 1, 1, 0, 1, 0, 0] * 16
    after = [1, 0, 1, 1, 1, 1, 0, 1] * 16
    diff, low, high = paired_bootstrap_diff(before, after, resamples=4000, seed=3)
    assert diff == pytest.approx(3 / 8)
    assert low < diff < high
    assert low > 0.2 and high < 0.55  # 128 pairs, per-pair differences 0/1 with mean 0.375
    # Same seed, same interval; the pairing matters: identical sides give a zero-width interval.
    assert paired_bootstrap_diff(before, after, resamples=4000, seed=3) == (diff, low, high)
    assert paired_bootstrap_diff(after, after, resamples=200) == (0.0, 0.0, 0.0)


def test_paired_bootstrap_rejects_unequal_sides() -> None:
    with pytest.raises(ValueError, match="equal"):
        paired_bootstrap_diff([1, 0], [1])


def _row(seed: int, success: bool, well_formed: bool = True) -> dict:
    return {
        "env_id": "ragen/FrozenLake-v0",
        "seed": seed,
        "success": success,
        "well_formed": well_formed,
    }


def test_paired_comparison_counts_pairs_and_restricts_to_well_formed_both_times() -> None:
    compare = _script().paired_comparison
    before = [
        _row(0, False, well_formed=False),  # fixed format and succeeded: only in "all"
        _row(1, False),
        _row(2, True),
        _row(3, False),
        _row(4, True),
    ]
    after = [_row(0, True), _row(1, True), _row(2, True), _row(3, False), _row(4, False)]
    got = compare(list(reversed(before)), after)  # matched by seed, not by position
    assert {
        k: got["all"][k] for k in ("pairs", "both", "before_only", "after_only", "neither")
    } == {
        "pairs": 5,
        "both": 1,
        "before_only": 1,
        "after_only": 2,
        "neither": 1,
    }
    assert got["all"]["mcnemar_p"] == pytest.approx(1.0)  # 3 discordant pairs: 2 * P[X <= 1] = 1
    wf = got["well_formed_both"]
    assert (wf["pairs"], wf["before_only"], wf["after_only"]) == (4, 1, 1)
    assert wf["success_before"] == pytest.approx(2 / 4) and wf["success_after"] == pytest.approx(
        2 / 4
    )
    assert got["well_formed_rate"]["before"]["episodes"] == 4
    assert got["well_formed_rate"]["after"]["success"] == pytest.approx(3 / 5)
    assert got["well_formed_share"] == {"before": 0.8, "after": 1.0}
    assert got["all"]["diff"] == pytest.approx(1 / 5)


def test_paired_comparison_refuses_unmatched_seeds() -> None:
    with pytest.raises(ValueError, match="seeds differ"):
        _script().paired_comparison([_row(0, True)], [_row(1, True)])


def test_action_reading_counts_sequences_and_first_actions():
    rows = [
        {"actions": ["Up", "Left"]},
        {"actions": ["Up", "Left"]},
        {"actions": ["Up", "Left"]},
        {"actions": ["Down"]},
        {"actions": []},  # no parsed action: first action ""
    ]
    got = _script().action_reading(rows)
    assert got == {
        "episodes": 5,
        "distinct_sequences": 3,
        "top_sequence": ["Up", "Left"],
        "top_share": 0.6,
        "first_action": {"Up": 3, "Down": 1, "": 1},
    }
    assert _script().action_reading([])["top_share"] is None
