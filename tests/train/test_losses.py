"""Loss aggregation modes, PPO clipping, KL estimators and the value loss by hand."""

from __future__ import annotations

import math

import pytest
import torch

from ragen_train.losses import (
    Denominators,
    aggregate,
    entropy_from_logits,
    kl_penalty,
    ppo_policy_loss,
    value_loss,
)

L = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
M = torch.tensor([[1.0, 1.0, 0.0], [1.0, 0.0, 0.0]])


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("token-mean", (1 + 2 + 4) / 3),  # sum over masked tokens / 3 tokens
        ("seq-mean-token-mean", ((1 + 2) / 2 + 4) / 2),  # (1.5 + 4) / 2 = 2.75
        ("seq-mean-token-sum", ((1 + 2) + 4) / 2),  # 3.5
        ("seq-mean-token-sum-norm", ((1 + 2) + 4) / 2 / 3),  # / T_norm = 3
    ],
)
def test_aggregation_modes_2x3(mode: str, expected: float) -> None:
    assert aggregate(L, M, mode).item() == pytest.approx(expected)


@pytest.mark.parametrize(
    "mode", ["token-mean", "seq-mean-token-mean", "seq-mean-token-sum", "seq-mean-token-sum-norm"]
)
def test_micro_batches_with_global_denominators_sum_to_the_full_batch(mode: str) -> None:
    denom = Denominators.of(M)
    parts = aggregate(L[:1], M[:1], mode, denom) + aggregate(L[1:], M[1:], mode, denom)
    assert parts.item() == pytest.approx(aggregate(L, M, mode).item())


def test_empty_mask_gives_zero_not_nan() -> None:
    z = torch.zeros_like(M)
    for mode in (
        "token-mean",
        "seq-mean-token-mean",
        "seq-mean-token-sum",
        "seq-mean-token-sum-norm",
    ):
        assert aggregate(L, z, mode).item() == 0.0
    with pytest.raises(ValueError, match="unknown loss_agg_mode"):
        aggregate(L, M, "mean")


def test_ppo_clip_asymmetric_and_dual_clip() -> None:
    # A=+1, ratio 1.5: clipped at 1+0.28 -> loss -1.28.
    # A=-1, ratio 0.5: max(0.5, 0.8) = 0.8 (clipped at 1-0.2).
    # A=-1, ratio 5:  max(5, 1.28) = 5, dual clip caps at -c*A = 3.
    # A=+1, ratio 1.1: inside the range -> -1.1.
    ratio = torch.tensor([[1.5, 0.5, 5.0, 1.1]])
    adv = torch.tensor([[1.0, -1.0, -1.0, 1.0]])
    old = torch.zeros_like(ratio)
    loss, stats = ppo_policy_loss(
        torch.log(ratio),
        old,
        adv,
        torch.ones_like(ratio),
        clip_low=0.2,
        clip_high=0.28,
        dual_clip=3.0,
    )
    assert loss[0].tolist() == pytest.approx([-1.28, 0.8, 3.0, -1.1], abs=1e-6)
    # Clip-active (clipped term larger than the unclipped one, as verl counts it): the first
    # two; the third is caught by the dual clip instead.
    assert stats["clipfrac"].item() == pytest.approx(2 / 4)
    assert stats["dualclip_frac"].item() == pytest.approx(1 / 4)
    loss_nodual, _ = ppo_policy_loss(
        torch.log(ratio), old, adv, torch.ones_like(ratio), dual_clip=None
    )
    assert loss_nodual[0, 2].item() == pytest.approx(5.0)


def test_kl_estimators() -> None:
    logp, ref = torch.tensor([-1.0]), torch.tensor([-1.5])  # x = 0.5
    assert kl_penalty(logp, ref, "k1").item() == pytest.approx(0.5)
    assert kl_penalty(logp, ref, "abs").item() == pytest.approx(0.5)
    assert kl_penalty(logp, ref, "k2").item() == pytest.approx(0.125)
    assert kl_penalty(logp, ref, "k3").item() == pytest.approx(
        math.exp(-0.5) + 0.5 - 1
    )  # 0.1065307
    assert kl_penalty(ref, logp, "abs").item() == pytest.approx(0.5)
    assert kl_penalty(torch.tensor([0.0]), torch.tensor([-100.0]), "k3").item() <= 10.0  # clamped
    with pytest.raises(ValueError, match="unknown KL estimator"):
        kl_penalty(logp, ref, "low-var-kl")


def test_value_loss_clipped() -> None:
    # V=2, V_old=0, R=1, clip 0.5: V_clip = 0.5 -> max((2-1)^2, (0.5-1)^2)/2 = 0.5
    # V=0.2, V_old=0, R=1: V_clip = 0.2 -> 0.5 * 0.64 = 0.32
    v = torch.tensor([[2.0, 0.2]])
    loss, _ = value_loss(v, torch.zeros_like(v), torch.ones_like(v), clip=0.5)
    assert loss[0].tolist() == pytest.approx([0.5, 0.32])
    # V=-1, V_old=0, R=1: unclipped 4, clipped (-0.5-1)^2=2.25 -> max = 4 -> 2
    loss, _ = value_loss(torch.tensor([[-1.0]]), torch.zeros((1, 1)), torch.ones((1, 1)), clip=0.5)
    assert loss.item() == pytest.approx(2.0)


def test_entropy_from_logits() -> None:
    assert entropy_from_logits(torch.zeros(4)).item() == pytest.approx(math.log(4))
    assert entropy_from_logits(torch.tensor([100.0, 0.0, 0.0])).item() == pytest.approx(
        0.0, abs=1e-6
    )
