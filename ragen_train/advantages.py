"""Advantage estimators: small pure functions in a registry.

Shapes: ``B`` samples (sequences), ``T`` token positions.  ``mask`` is 1 on the tokens
the policy generated (the loss mask), 0 elsewhere.  Outcome estimators (GRPO family)
work on one scalar score per sample, ``scores: (B,)``, and broadcast the advantage over
the sample's generated tokens; GAE estimators work on token-level ``rewards: (B, T)``
and critic ``values: (B, T)``.

Every estimator returns ``(advantages, returns)``, both ``(B, T)`` and zero where
``mask`` is 0.

Robustness rules (tested in ``tests/train/test_advantages.py``):

* a group whose finite scores have a *population* standard deviation of at most
  :data:`CONSTANT_GROUP_TOL` is *constant*: its advantages are exactly 0 (RAGEN divides
  by ``std + 1e-6`` and turns float noise such as ``[0.3, 0.3, 0.3, 0.3000001]`` into
  ±0.87 advantages).  The rollout filter (:mod:`ragen_train.filtering`) uses the same
  test, so a group with all-zero advantages is exactly a group that scores 0 there;
* a group of size 1 gets advantage 0, not NaN;
* a sample whose score is NaN (or missing, passed as NaN) is excluded from its group's
  statistics, gets advantage 0 and a zero mask entry in ``valid``; the caller warns.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ragen_bench.registry import Registry

if TYPE_CHECKING:  # torch loads where it computes, so that the config imports without it
    from torch import Tensor

#: The one "zero variance" tolerance of the trainer: a group whose finite scores have a
#: population standard deviation ``sqrt(mean((s - mean)^2))`` of at most this is *constant*.
#: Its advantages are exactly 0 (here), its ``reward_std`` filter score is exactly 0, it
#: counts in ``filter/zero_score_groups`` and ``include_zero=False`` removes it
#: (:mod:`ragen_train.filtering`).  The population (not the unbiased) std is the statistic
#: because it is the filter's score (RAGEN's ``reward_variance``); the unbiased std only
#: normalises advantages.  Tested both ways in ``tests/train/test_filtering.py``.
CONSTANT_GROUP_TOL = 1e-6

#: The advantage estimators, by the name ``algorithm.adv_estimator`` takes.  Metadata of
#: each entry (read by the trainer, the config checks and the TRL/verl mappings):
#:
#: * ``level``: ``"outcome"`` (one score per sample, ``fn(scores, group_ids, mask)``; needs
#:   groups of at least 2) or ``"token"`` (``fn(rewards, values, mask, turn_ids)``);
#: * ``needs_critic``: the estimator reads critic values (PPO's value model is trained);
#: * ``trl``: the ``GRPOConfig`` settings that give the same advantage in TRL, or ``None``
#:   (no counterpart; ``trl_why`` says why);
#: * ``verl``: the verl overrides selecting the same estimator, or ``None`` (``verl_why``).
_TRL_GROUP_ONLY = "GRPOTrainer has group-relative advantages only (no critic, no leave-one-out)"

ADVANTAGE_ESTIMATORS: Registry[Callable[..., tuple[Tensor, Tensor]]] = Registry(
    "advantage estimator"
)


def register_estimator(
    name: str,
    *,
    level: str,
    needs_critic: bool,
    trl: dict[str, Any] | None = None,
    trl_why: str = "",
    verl: dict[str, Any] | None = None,
    verl_why: str = "",
) -> Callable[[Callable[..., tuple[Tensor, Tensor]]], Callable[..., tuple[Tensor, Tensor]]]:
    """Decorator adding an estimator to :data:`ADVANTAGE_ESTIMATORS` with its metadata.

    Raises:
        ValueError: ``level`` is not ``outcome``/``token``, or the name is taken.
    """
    if level not in ("outcome", "token"):
        raise ValueError(f"estimator level must be 'outcome' or 'token', got {level!r}")
    return ADVANTAGE_ESTIMATORS.register(
        name,
        level=level,
        needs_critic=needs_critic,
        trl=trl,
        trl_why=trl_why,
        verl=verl,
        verl_why=verl_why,
    )


def get_estimator(name: str) -> Callable[..., tuple[Tensor, Tensor]]:
    """Look up an estimator by name.

    Raises:
        KeyError: unknown name (:class:`~ragen_bench.registry.UnknownNameError`; the
            message lists the known ones).
    """
    return ADVANTAGE_ESTIMATORS.get(name)


def needs_critic(name: str) -> bool:
    """Whether estimator ``name`` reads critic values (raises ``KeyError`` if unknown)."""
    return bool(ADVANTAGE_ESTIMATORS.meta(name, "needs_critic"))


# ---------------------------------------------------------------- outcome-level
def _group_stats(scores: Tensor, group_ids: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """Per-sample group mean, unbiased std, group size (over valid scores) and validity."""
    import torch

    scores = scores.double()
    valid = torch.isfinite(scores)
    mean = torch.zeros_like(scores)
    std = torch.zeros_like(scores)
    size = torch.zeros_like(scores)
    for g in torch.unique(group_ids):
        idx = (group_ids == g) & valid
        n = int(idx.sum())
        if n == 0:
            continue
        vals = scores[idx]
        m = vals.mean()
        s = vals.std(unbiased=True) if n > 1 else torch.zeros((), dtype=scores.dtype)
        mean[group_ids == g] = m
        std[group_ids == g] = s
        size[group_ids == g] = n
    return mean, std, size, valid


def _constant(std: Tensor, size: Tensor, valid: Tensor, tol: float = CONSTANT_GROUP_TOL) -> Tensor:
    """Samples without a learning signal: invalid, in a group of fewer than 2 valid scores, or
    in a constant group (population std ``std·sqrt((n-1)/n) <= tol``, :data:`CONSTANT_GROUP_TOL`)."""
    import torch

    n = size.clamp(min=1)
    population_std = std * torch.sqrt((n - 1) / n)
    return (population_std <= tol) | (size < 2) | ~valid


def _warn_invalid(valid: Tensor) -> None:
    bad = int((~valid).sum())
    if bad:
        warnings.warn(
            f"{bad} sample(s) have a NaN or missing reward; they are masked out of the update",
            RuntimeWarning,
            stacklevel=3,
        )


def _broadcast(adv: Tensor, mask: Tensor) -> Tensor:
    import torch

    return adv.to(torch.float32)[:, None] * mask.to(torch.float32)


def group_advantages(
    scores: Tensor,
    group_ids: Tensor,
    *,
    norm_by_std: bool = True,
    eps: float = 1e-6,
    tol: float = CONSTANT_GROUP_TOL,
) -> tuple[Tensor, Tensor]:
    """Outcome advantages per sample: ``(s - mean_g) / (std_g + eps)`` or ``s - mean_g``.

    Args:
        scores: ``(B,)`` sample scores (NaN = missing).
        group_ids: ``(B,)`` integer group of each sample (samples of one prompt).
        norm_by_std: divide by the unbiased group std (GRPO, Shao et al. 2024,
            arXiv 2402.03300, section 4.1.2) or not (Dr. GRPO, Liu et al. 2025,
            arXiv 2503.20783, section 3.1).
        eps: added to the std (RAGEN and verl use 1e-6).
        tol: groups whose population std is <= tol are constant and get exactly 0
            (:data:`CONSTANT_GROUP_TOL`).

    Returns:
        ``(adv, valid)``: ``(B,)`` float64 advantages and the boolean validity mask.
    """
    import torch

    mean, std, size, valid = _group_stats(scores, group_ids)
    adv = scores.double() - mean
    if norm_by_std:
        adv = adv / (std + eps)
    adv = torch.where(_constant(std, size, valid, tol), torch.zeros_like(adv), adv)
    return adv, valid


@register_estimator(
    "grpo",
    level="outcome",
    needs_critic=False,
    trl={"scale_rewards": "group"},
    verl={"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": True},
)
def grpo(
    scores: Tensor, group_ids: Tensor, mask: Tensor, *, eps: float = 1e-6, **_: Any
) -> tuple[Tensor, Tensor]:
    """GRPO: group-normalised return with unbiased std and ``eps`` (see :func:`group_advantages`).

    Args:
        scores: ``(B,)``; group_ids: ``(B,)``; mask: ``(B, T)``.

    Returns:
        ``(advantages, returns)`` ``(B, T)``; returns equal advantages (no critic).
    """
    adv, valid = group_advantages(scores, group_ids, norm_by_std=True, eps=eps)
    _warn_invalid(valid)
    a = _broadcast(adv, mask)
    return a, a.clone()


@register_estimator(
    "dr_grpo",
    level="outcome",
    needs_critic=False,
    trl={"scale_rewards": "none"},
    verl={"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": False},
)
def dr_grpo(scores: Tensor, group_ids: Tensor, mask: Tensor, **_: Any) -> tuple[Tensor, Tensor]:
    """Dr. GRPO: ``s - mean_g`` without std division (Liu et al. 2025, arXiv 2503.20783)."""
    adv, valid = group_advantages(scores, group_ids, norm_by_std=False)
    _warn_invalid(valid)
    a = _broadcast(adv, mask)
    return a, a.clone()


@register_estimator(
    "rloo",
    level="outcome",
    needs_critic=False,
    trl_why=_TRL_GROUP_ONLY,
    verl={"algorithm.adv_estimator": "rloo"},
)
def rloo(scores: Tensor, group_ids: Tensor, mask: Tensor, **_: Any) -> tuple[Tensor, Tensor]:
    """RLOO: ``s_i - mean_{j != i} s_j = n/(n-1) (s_i - mean_g)`` (Ahmadian et al. 2024,
    arXiv 2402.14740, eq. 7; Kool et al. 2019).  Groups of size 1 or constant groups get 0."""
    import torch

    mean, std, size, valid = _group_stats(scores, group_ids)
    n = size.clamp(min=2)
    adv = (scores.double() - mean) * n / (n - 1)
    adv = torch.where(_constant(std, size, valid), torch.zeros_like(adv), adv)
    _warn_invalid(valid)
    a = _broadcast(adv, mask)
    return a, a.clone()


# ------------------------------------------------------------------- token-level
def whiten(values: Tensor, mask: Tensor, *, shift_mean: bool = True, eps: float = 1e-8) -> Tensor:
    """Masked whitening ``(x - mean) * rsqrt(var + eps)`` with the unbiased masked variance.

    As in verl's ``masked_whiten`` (used by RAGEN after GAE).  Returns 0 off the mask.
    """
    import torch

    m = mask.to(values.dtype)
    n = m.sum()
    if n < 2:
        return values * m
    mean = (values * m).sum() / n
    var = (((values - mean) ** 2) * m).sum() / (n - 1)
    out = (values - mean) * torch.rsqrt(var + eps)
    if not shift_mean:
        out = out + mean
    return out * m


def _gae_1d(
    rewards: list[float], values: list[float], gamma: float, lam: float
) -> tuple[list[float], list[float]]:
    """GAE over one sequence of generated positions (already compacted, no gaps)."""
    n = len(rewards)
    adv = [0.0] * n
    last = 0.0
    for t in range(n - 1, -1, -1):
        next_v = values[t + 1] if t + 1 < n else 0.0
        delta = rewards[t] + gamma * next_v - values[t]
        last = delta + gamma * lam * last
        adv[t] = last
    return adv, [a + v for a, v in zip(adv, values)]


@register_estimator(
    "gae",
    level="token",
    needs_critic=True,
    trl_why=_TRL_GROUP_ONLY,
    verl={"algorithm.adv_estimator": "gae"},
)
def gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
    whiten_advantages: bool = True,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Token-level generalised advantage estimation (Schulman et al. 2016, arXiv 1506.02438, eq. 16).

    Over the generated positions ``t_1 < t_2 < ... < t_n`` of each sample (positions off
    the mask are skipped, so observation tokens between turns carry nothing):
    ``δ_k = r_k + γ V_{k+1} − V_k`` with ``V_{n+1} = 0``, ``A_k = δ_k + γλ A_{k+1}``,
    returns ``R_k = A_k + V_k``.

    Args:
        rewards: ``(B, T)`` token rewards (usually the return on the last generated token).
        values: ``(B, T)`` critic values at each position.
        mask: ``(B, T)`` loss mask.
        gamma, lam: discount and GAE λ (RAGEN's defaults are 1 and 1).
        whiten_advantages: whiten over the batch afterwards (masked, unbiased variance).

    Returns:
        ``(advantages, returns)``, ``(B, T)`` float32, 0 off the mask.
    """
    import torch

    adv = torch.zeros_like(rewards, dtype=torch.float64)
    ret = torch.zeros_like(rewards, dtype=torch.float64)
    for b in range(rewards.shape[0]):
        pos = torch.nonzero(mask[b] > 0, as_tuple=False).flatten()
        if pos.numel() == 0:
            continue
        a, r = _gae_1d(
            rewards[b, pos].double().tolist(), values[b, pos].double().tolist(), gamma, lam
        )
        adv[b, pos] = torch.tensor(a, dtype=torch.float64)
        ret[b, pos] = torch.tensor(r, dtype=torch.float64)
    if whiten_advantages:
        adv = whiten(adv, mask)
    return adv.float() * mask, ret.float() * mask


@register_estimator(
    "bilevel_gae",
    level="token",
    needs_critic=True,
    trl_why=_TRL_GROUP_ONLY,
    verl_why="bi-level GAE has no verl estimator",
)
def bilevel_gae(
    rewards: Tensor,
    values: Tensor,
    mask: Tensor,
    turn_ids: Tensor,
    *,
    gamma: float = 1.0,
    lam: float = 1.0,
    turn_gamma: float = 0.95,
    whiten_advantages: bool = True,
    **_: Any,
) -> tuple[Tensor, Tensor]:
    """Bi-level GAE: turn-level GAE with its own discount, then token-level GAE inside turns.

    Hierarchical credit assignment in the spirit of ArCHer (Zhou et al. 2024,
    arXiv 2402.19446) as specified by RAGEN's ``bi_level_gae`` (which crashes there:
    RAGEN-AI/RAGEN ``ragen/trainer/core_algos.py``).  For each sample with turns
    ``k = 1..K`` whose generated positions end at ``e_k``:

    1. turn reward ``R_k`` = sum of the rewards of turn k's tokens; turn value
       ``V_k = V(e_k)``;
    2. turn-level GAE with ``turn_gamma`` (γ_h) and λ:
       ``δ_k = R_k + γ_h V_{k+1} − V_k`` (``V_{K+1} = 0``), ``A_k = δ_k + γ_h λ A_{k+1}``;
    3. the end-of-turn token gets the target ``A_k + V_k``; token-level GAE with γ and λ
       runs inside each turn on rewards that are 0 except that target at ``e_k``, with the
       value after ``e_k`` taken as 0 (so ``δ(e_k) = A_k``).

    Args:
        rewards, values, mask: ``(B, T)`` as in :func:`gae`.
        turn_ids: ``(B, T)`` turn index of each generated token (any value off the mask).

    Returns:
        ``(advantages, returns)`` ``(B, T)``; returns are token-level GAE targets.
    """
    import torch

    adv = torch.zeros_like(rewards, dtype=torch.float64)
    ret = torch.zeros_like(rewards, dtype=torch.float64)
    for b in range(rewards.shape[0]):
        pos = torch.nonzero(mask[b] > 0, as_tuple=False).flatten()
        if pos.numel() == 0:
            continue
        turns = turn_ids[b, pos].tolist()
        order: list[int] = []
        spans: dict[int, list[int]] = {}
        for p, t in zip(pos.tolist(), turns):
            if t not in spans:
                order.append(t)
                spans[t] = []
            spans[t].append(p)
        r_turn = [float(rewards[b, spans[t]].double().sum()) for t in order]
        v_turn = [float(values[b, spans[t][-1]]) for t in order]
        a_turn = _gae_1d(r_turn, v_turn, turn_gamma, lam)[0]
        for k, t in enumerate(order):
            ps = spans[t]
            tok_r = [0.0] * len(ps)
            tok_r[-1] = a_turn[k] + v_turn[k]
            a, r = _gae_1d(tok_r, values[b, ps].double().tolist(), gamma, lam)
            adv[b, ps] = torch.tensor(a, dtype=torch.float64)
            ret[b, ps] = torch.tensor(r, dtype=torch.float64)
    if whiten_advantages:
        adv = whiten(adv, mask)
    return adv.float() * mask, ret.float() * mask
