"""Losses: PPO clipped surrogate, aggregation modes, entropy, KL estimators, value loss.

Shapes: ``(B, T)`` per-token tensors with a ``(B, T)`` loss mask.

Aggregation modes (``loss_agg_mode``, names as in verl / RAGEN; ``agg_loss`` in
verl-project/verl ``verl/trainer/ppo/core_algos.py``):

=========================  ==========================================================
``token-mean``             ``Σ_bt L·m / Σ_bt m``
``seq-mean-token-mean``    ``mean_b ( Σ_t L·m / Σ_t m )`` over sequences with tokens
``seq-mean-token-sum``     ``mean_b Σ_t L·m`` (Dr. GRPO, arXiv 2503.20783)
``seq-mean-token-sum-norm`` ``mean_b Σ_t L·m / T_norm`` with a constant ``T_norm``
=========================  ==========================================================

With micro-batches and data parallelism the mean must be over the whole mini-batch,
not each micro-batch: :func:`aggregate` takes the global denominators (token count,
sequence count) so that summing micro-batch losses gives exactly the full-batch value.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ragen_bench.registry import Registry

if TYPE_CHECKING:  # torch loads where it computes, so that the config imports without it
    from torch import Tensor

#: Loss aggregation modes, by the name ``algorithm.loss_agg_mode`` takes:
#: ``fn(loss, mask, denom) -> scalar``.  Metadata: ``trl`` = ``(loss_type, completion
#: length)`` of the closest TRL ``GRPOConfig`` (length ``"norm_len"`` = ``T_norm``, ``None``
#: = unused), ``trl_exact``: TRL's loss equals ours; ``verl_scale_factor``: verl needs ``loss_scale_factor = T_norm`` (verl uses
#: the same mode names).
AGG_MODES: Registry[Callable[[Tensor, Tensor, Denominators], Tensor]] = Registry("loss_agg_mode")

#: KL(π ‖ π_ref) estimators by the name ``algorithm.kl_estimator`` takes:
#: ``fn(x) -> (B, T)`` with ``x = logπ − logπ_ref``.  Metadata: ``verl`` = verl's
#: ``kl_loss_type`` / ``kl_penalty`` name; ``trl``: TRL's loss uses this estimator.
KL_ESTIMATORS: Registry[Callable[[Tensor], Tensor]] = Registry("KL estimator")


@dataclass(frozen=True)
class Denominators:
    """Global normalisers of one mini-batch (summed over micro-batches and ranks).

    Attributes:
        tokens: total masked tokens.
        seqs: number of sequences with at least one masked token.
        norm_len: ``T_norm`` for ``seq-mean-token-sum-norm``.
    """

    tokens: float
    seqs: float
    norm_len: float = 1.0

    @staticmethod
    def of(mask: Tensor, norm_len: float | None = None) -> Denominators:
        """Denominators of a full batch ``mask`` (``norm_len`` defaults to ``T``)."""
        m = mask.float()
        return Denominators(
            tokens=float(m.sum()),
            seqs=float((m.sum(-1) > 0).sum()),
            norm_len=float(norm_len if norm_len is not None else mask.shape[-1]),
        )


def aggregate(loss: Tensor, mask: Tensor, mode: str, denom: Denominators | None = None) -> Tensor:
    """Reduce a ``(B, T)`` per-token loss to a scalar (see module table).

    Args:
        loss: ``(B, T)`` per-token values.
        mask: ``(B, T)`` 0/1 loss mask.
        mode: a name in :data:`AGG_MODES`.
        denom: global denominators; default: those of this ``mask`` alone.

    Returns:
        A scalar tensor (0 when the mask is empty — never NaN).

    Raises:
        ValueError: unknown mode.
    """
    return AGG_MODES.get(mode)(loss, mask, denom or Denominators.of(mask))


@AGG_MODES.register("token-mean", trl=("dapo", None), trl_exact=True, verl_scale_factor=False)
def token_mean(loss: Tensor, mask: Tensor, denom: Denominators) -> Tensor:
    """``Σ_bt L·m / Σ_bt m`` over the mini-batch's token count."""
    return (loss * mask.to(loss.dtype)).sum() / max(denom.tokens, 1.0)


@AGG_MODES.register(
    "seq-mean-token-mean", trl=("grpo", None), trl_exact=False, verl_scale_factor=False
)
def seq_mean_token_mean(loss: Tensor, mask: Tensor, denom: Denominators) -> Tensor:
    """``mean_b ( Σ_t L·m / Σ_t m )`` over the sequences that have tokens."""
    m = mask.to(loss.dtype)
    seq_mean = (loss * m).sum(-1) / m.sum(-1).clamp(min=1.0)
    return seq_mean.sum() / max(denom.seqs, 1.0)


@AGG_MODES.register(
    "seq-mean-token-sum", trl=("dr_grpo", 1.0), trl_exact=False, verl_scale_factor=False
)
def seq_mean_token_sum(loss: Tensor, mask: Tensor, denom: Denominators) -> Tensor:
    """``mean_b Σ_t L·m`` (Dr. GRPO, arXiv 2503.20783)."""
    return (loss * mask.to(loss.dtype)).sum() / max(denom.seqs, 1.0)


@AGG_MODES.register(
    "seq-mean-token-sum-norm", trl=("dr_grpo", "norm_len"), trl_exact=False, verl_scale_factor=True
)
def seq_mean_token_sum_norm(loss: Tensor, mask: Tensor, denom: Denominators) -> Tensor:
    """``mean_b Σ_t L·m / T_norm`` with the constant ``T_norm = denom.norm_len``."""
    return seq_mean_token_sum(loss, mask, denom) / denom.norm_len


def ppo_policy_loss(
    logp: Tensor,
    old_logp: Tensor,
    advantages: Tensor,
    mask: Tensor,
    *,
    clip_low: float = 0.2,
    clip_high: float = 0.28,
    dual_clip: float | None = 3.0,
) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token PPO clipped surrogate with asymmetric clipping and dual clip.

    ``r = exp(clamp(logπ − logπ_old, −20, 20))``;
    ``L = max(−A·r, −A·clip(r, 1−ε_low, 1+ε_high))`` (PPO, Schulman et al. 2017,
    arXiv 1707.06347, eq. 7; asymmetric "clip-higher" from DAPO, Yu et al. 2025,
    arXiv 2503.14476, eq. 10); for ``A < 0`` also ``L = min(L, −c·A)`` (dual clip, Ye
    et al. 2020, arXiv 1912.09729, eq. 5).

    Returns:
        ``(loss (B, T), stats)`` with masked means ``clipfrac``, ``clipfrac_lower``,
        ``dualclip_frac``, ``approx_kl`` (``E[logπ_old − logπ]``) and ``ratio``.
    """
    import torch

    log_ratio = (logp - old_logp).clamp(-20.0, 20.0)
    ratio = torch.exp(log_ratio)
    pg1 = -advantages * ratio
    pg2 = -advantages * ratio.clamp(1.0 - clip_low, 1.0 + clip_high)
    loss = torch.maximum(pg1, pg2)
    m = mask.float()
    n = m.sum().clamp(min=1.0)
    clipped = (pg2 > pg1).float()
    stats = {
        "clipfrac": (clipped * m).sum() / n,
        "clipfrac_lower": (clipped * (ratio < 1.0 - clip_low).float() * m).sum() / n,
        "approx_kl": (-log_ratio * m).sum() / n,
        "ratio": (ratio * m).sum() / n,
    }
    if dual_clip is not None:
        if dual_clip <= 1.0:
            raise ValueError(f"dual_clip must be > 1, got {dual_clip}")
        cap = -advantages * dual_clip
        dual = (advantages < 0) & (loss > cap)
        loss = torch.where(advantages < 0, torch.minimum(loss, cap), loss)
        stats["dualclip_frac"] = (dual.float() * m).sum() / n
    return loss, {k: v.detach() for k, v in stats.items()}


def kl_penalty(logp: Tensor, ref_logp: Tensor, estimator: str = "k3") -> Tensor:
    """Per-token KL(π ‖ π_ref) estimate from sampled-token log-probs.

    With ``x = logπ − logπ_ref`` (Schulman, "Approximating KL divergence", 2020), one of
    :data:`KL_ESTIMATORS`: ``k1 = x``; ``abs = |x|``; ``k2 = x²/2``;
    ``k3 = e^{−x} + x − 1`` (low variance, unbiased; ``x`` clamped to ±20 and the result
    to [−10, 10] as in verl).

    Raises:
        ValueError: unknown estimator.
    """
    return KL_ESTIMATORS.get(estimator)(logp - ref_logp)


@KL_ESTIMATORS.register("k1", verl="kl", trl=False)
def kl_k1(x: Tensor) -> Tensor:
    """``k1 = x`` (unbiased, high variance)."""
    return x


@KL_ESTIMATORS.register("k2", verl="mse", trl=False)
def kl_k2(x: Tensor) -> Tensor:
    """``k2 = x²/2``."""
    return 0.5 * x.square()


@KL_ESTIMATORS.register("k3", verl="low_var_kl", trl=True)
def kl_k3(x: Tensor) -> Tensor:
    """``k3 = e^{−x} + x − 1`` with ``x`` clamped to ±20 and the result to [−10, 10]."""
    import torch

    x = x.clamp(-20.0, 20.0)
    return (torch.exp(-x) + x - 1.0).clamp(-10.0, 10.0)


@KL_ESTIMATORS.register("abs", verl="abs", trl=False)
def kl_abs(x: Tensor) -> Tensor:
    """``abs = |x|``."""
    return x.abs()


def entropy_from_logits(logits: Tensor) -> Tensor:
    """Entropy of ``softmax(logits)`` along the last axis: ``logsumexp(z) − Σ p z``."""
    import torch

    logits = logits.float()
    p = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (p * logits).sum(-1)


def value_loss(
    values: Tensor, old_values: Tensor, returns: Tensor, *, clip: float | None = 0.5
) -> tuple[Tensor, dict[str, Tensor]]:
    """Per-token clipped value loss ``½ max((V − R)², (V_clip − R)²)`` with
    ``V_clip = V_old + clip(V − V_old, −c, c)`` (PPO2 baselines; verl ``cliprange_value``).

    Returns:
        ``(loss (B, T), stats)`` with the unreduced clip indicator mean over all positions.
    """
    import torch

    unclipped = (values - returns).square()
    if clip is None:
        return 0.5 * unclipped, {"vf_clipfrac": torch.zeros(())}
    v_clip = old_values + (values - old_values).clamp(-clip, clip)
    clipped = (v_clip - returns).square()
    loss = 0.5 * torch.maximum(unclipped, clipped)
    return loss, {"vf_clipfrac": (clipped > unclipped).float().mean().detach()}


def tis_weights(
    old_logp: Tensor, rollout_logp: Tensor, cap: float, mask: Tensor | None = None
) -> Tensor:
    """Truncated importance-sampling weights for rollouts sampled by another engine.

    ``w_t = min(exp(log π_train(a_t) − log π_rollout(a_t)), C)``, detached: the policy
    gradient of samples drawn from the inference engine's distribution ``π_rollout`` (e.g.
    vLLM, which differs slightly from the training model's ``π_train`` even with the same
    weights) is reweighted toward the training distribution, with the ratio capped at ``C``
    to bound the variance (Yao et al. 2025, "Your Efficient RL Framework Secretly Brings
    You Off-Policy RL Training", truncated importance sampling; verl's
    ``tis_imp_ratio_cap``).

    Args:
        old_logp: ``(B, T)`` log-probs of the sampled tokens under the training model
            before the update.
        rollout_logp: ``(B, T)`` the same tokens' log-probs reported by the rollout engine.
        cap: ``C >= 1``.
        mask: ``(B, T)``; weights outside it are 1.

    Returns:
        ``(B, T)`` weights in ``(0, C]``.

    Raises:
        ValueError: ``cap < 1`` or mismatched shapes.
    """
    import torch

    if cap < 1:
        raise ValueError(f"tis cap must be >= 1, got {cap}")
    if old_logp.shape != rollout_logp.shape:
        raise ValueError(
            f"shapes differ: old_logp {tuple(old_logp.shape)} vs rollout_logp {tuple(rollout_logp.shape)}"
        )
    w = torch.exp((old_logp - rollout_logp).detach().clamp(max=30.0)).clamp(max=cap)
    if mask is not None:
        w = torch.where(mask > 0, w, torch.ones_like(w))
    return w
