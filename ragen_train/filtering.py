"""Rollout filtering (RAGEN-2's SNR-adaptive filtering): keep informative groups.

Each group (the episodes of one prompt/seed) gets a *score*; a *strategy* picks which
groups to keep; the update then uses only the kept groups, optionally rescaling the
loss by the kept fraction.  RAGEN-2 (arXiv 2604.06268) argues that the task gradient is
bounded by the reward variance of the group while the KL and entropy gradients are
not, so low-variance groups mostly add regulariser noise (its signal-to-noise argument).

Scores (``metric``): ``reward_std`` (default; RAGEN calls it ``reward_variance`` but
computes the std — RAGEN-AI/RAGEN ``ragen/trainer/rollout_filter.py``), ``reward_mean``,
``entropy`` (mean token entropy of the group), ``length`` (mean response tokens).

Strategies (``strategy``; RAGEN's semantics, RAGEN-AI/RAGEN ``ragen/trainer/rollout_filter.py``,
which we keep and make well defined):

* ``top_p`` + ``linear``: sort scores descending; keep the shortest prefix whose
  cumulative score reaches ``value · Σ score − eps``; zero scores never count.  If no
  prefix reaches it (e.g. all scores are 0) nothing is kept.  ``value >= 1`` keeps all.
* ``top_p`` + ``softmax``: ``p = softmax(score)``; keep the shortest prefix whose
  cumulative ``p`` reaches ``value``.
* ``top_k``: keep ``max(1, min(floor(value · n_candidates), n_candidates))`` best groups,
  where the candidates are the groups left after the zero rule below (RAGEN uses the
  number of all groups there — a defect, section 6.8).
* ``top_k_abs``: keep ``max(1, min(floor(value), n_candidates))`` best groups.
* ``min_p``: keep groups with ``score >= value · max(score)``.

``include_zero=False`` first removes groups with ``|score| <= CONSTANT_GROUP_TOL``
(:data:`ragen_train.advantages.CONSTANT_GROUP_TOL`, 1e-6, the trainer's one "zero
variance" tolerance).  For ``reward_std`` these are exactly the constant groups, whose
advantages are exactly 0: a ``reward_std`` at or below the tolerance *is* 0 (the score is
snapped), so it also never counts towards ``top_p``.  Ties are broken by group index
(stable), so the outcome is deterministic.

Non-finite values (a NaN / missing episode reward) are left out of their group's score,
as the trainer leaves such samples out of the update; a group with fewer than two finite
values has ``reward_std`` 0 (no within-group contrast to learn from; a mean score of a
group with no finite value is 0), so the metrics stay finite.

An empty selection skips the update (counted in ``filter/empty``); the trainer stops
after ``empty_stop_steps`` consecutive empty steps.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, fields
from typing import Any

import numpy as np

from ragen_bench.registry import Registry
from ragen_envs.ranges import Range

from .advantages import CONSTANT_GROUP_TOL
from .fields import setting

#: Group selection strategies by the name ``algorithm.filter.strategy`` takes:
#: ``fn(scores, candidates, value, **kwargs) -> kept indices``.
STRATEGIES: Registry[Callable[..., list[int]]] = Registry("filter strategy")
METRICS = ("reward_std", "reward_mean", "entropy", "length")
LOSS_SCALING = ("none", "linear", "sqrt")
#: ``global``: rank every group of a step together; ``per_env``: each env's groups apart
#: (a multi-env run, :func:`ragen_train.multienv.select_groups_per_env`).
SCOPES = ("global", "per_env")


def register_strategy(name: str) -> Callable[[Callable[..., list[int]]], Callable[..., list[int]]]:
    """Decorator adding a selection strategy to :data:`STRATEGIES`."""
    return STRATEGIES.register(name)


def _order(scores: np.ndarray, candidates: Sequence[int]) -> list[int]:
    """Candidates sorted by score, descending; ties by index (stable)."""
    return sorted(candidates, key=lambda i: (-scores[i], i))


@register_strategy("top_p")
def top_p(
    scores: np.ndarray,
    candidates: Sequence[int],
    value: float,
    *,
    mode: str = "linear",
    eps: float = 0.01,
) -> list[int]:
    """Nucleus-style selection (module docstring)."""
    if value >= 1.0:
        return list(candidates)
    order = _order(scores, candidates)
    if not order:
        return []
    if mode == "linear":
        total = float(sum(max(scores[i], 0.0) for i in order))
        threshold = value * total - eps
        if total <= 0:
            return []
        acc, kept = 0.0, []
        for i in order:
            if scores[i] <= 0:
                break
            acc += float(scores[i])
            kept.append(i)
            if acc >= threshold:
                return kept
        return []
    if mode == "softmax":
        s = np.array([scores[i] for i in order], dtype=np.float64)
        p = np.exp(s - s.max())
        p /= p.sum()
        cum = np.cumsum(p)
        k = int(np.searchsorted(cum, value - 1e-12)) + 1
        return order[: min(k, len(order))]
    raise ValueError(f"top_p mode must be 'linear' or 'softmax', got {mode!r}")


@register_strategy("top_k")
def top_k(scores: np.ndarray, candidates: Sequence[int], value: float, **_: object) -> list[int]:
    """The best ``max(1, min(floor(value·n), n))`` candidates."""
    n = len(candidates)
    if n == 0:
        return []
    k = max(1, min(math.floor(value * n), n))
    return _order(scores, candidates)[:k]


@register_strategy("top_k_abs")
def top_k_abs(
    scores: np.ndarray, candidates: Sequence[int], value: float, **_: object
) -> list[int]:
    """The best ``max(1, min(floor(value), n))`` candidates."""
    n = len(candidates)
    if n == 0:
        return []
    k = max(1, min(math.floor(value), n))
    return _order(scores, candidates)[:k]


@register_strategy("min_p")
def min_p(scores: np.ndarray, candidates: Sequence[int], value: float, **_: object) -> list[int]:
    """Candidates with ``score >= value · max(score)``."""
    if not candidates:
        return []
    best = max(scores[i] for i in candidates)
    return [i for i in _order(scores, candidates) if scores[i] >= value * best]


@dataclass(frozen=True)
class FilterConfig:
    """Rollout filter settings (defaults: keep everything, like RAGEN's ``top_p`` 1.0).

    Attributes:
        strategy: ``top_p`` | ``top_k`` | ``top_k_abs`` | ``min_p``.
        value: the strategy's parameter.
        metric: group score, one of :data:`METRICS`.
        top_p_mode: ``linear`` | ``softmax``.
        eps: ``linear`` top-p slack (RAGEN's ``selection_eps`` 0.01).
        include_zero: keep zero-score groups as candidates.
        loss_scaling: ``none`` | ``linear`` | ``sqrt`` of the kept fraction ρ.
        empty_stop_steps: stop training after this many consecutive empty steps.
        scope: one of :data:`SCOPES` (matters only when a step has several envs).
    """

    strategy: str = setting(
        "top_p",
        "How groups are picked: top_p by cumulative score, top_k share, top_k_abs count, or "
        "min_p relative to the best (RAGEN rollout_filter_strategy top_p).",
        choices=lambda: sorted(STRATEGIES),
    )
    value: float = setting(
        1.0,
        "The strategy's parameter (top_p mass, top_k share, count, min_p ratio); top_p 1 keeps "
        "every group (RAGEN rollout_filter_value 1.0).",
        range=Range(ge=0),
    )
    metric: str = setting(
        "reward_std",
        "Group score: reward std (RAGEN's reward_variance computes the std), mean reward, "
        "mean token entropy, or mean response length.",
        choices=METRICS,
    )
    top_p_mode: str = setting(
        "linear",
        "top_p over the raw scores (linear) or over their softmax (RAGEN top_p_prob_mode).",
        choices=("linear", "softmax"),
    )
    eps: float = setting(
        0.01,
        "linear top_p slack: the threshold is value * sum(score) - eps (RAGEN selection_eps).",
        range=Range(ge=0),
    )
    include_zero: bool = setting(
        True, "Keep groups with a zero score (constant rewards) as candidates (RAGEN include_zero)."
    )
    loss_scaling: str = setting(
        "none",
        "Rescale the loss by the kept fraction rho of groups: none, rho, or sqrt(rho) (as RAGEN's trainer).",
        choices=LOSS_SCALING,
    )
    empty_stop_steps: int = setting(
        5,
        "Stop after this many consecutive steps with every group filtered out "
        "(RAGEN rollout_filter_empty_stop_steps 5).",
        range=Range(ge=1),
    )
    scope: str = setting(
        "global",
        "Rank all groups of a step together (global) or each env's groups apart (per_env).",
        choices=SCOPES,
    )

    @classmethod
    def from_section(cls, section: object) -> FilterConfig:
        """Build from the config's ``algorithm.filter`` section (any object with these fields)."""
        return cls(**{f.name: getattr(section, f.name) for f in fields(cls)})

    def __post_init__(self) -> None:
        if self.strategy not in STRATEGIES:
            raise FilterSettingError(
                "strategy", f"must be one of {sorted(STRATEGIES)}, got {self.strategy!r}"
            )
        if self.metric not in METRICS:
            raise FilterSettingError("metric", f"must be one of {METRICS}, got {self.metric!r}")
        if self.loss_scaling not in LOSS_SCALING:
            raise FilterSettingError(
                "loss_scaling", f"must be one of {LOSS_SCALING}, got {self.loss_scaling!r}"
            )
        if self.value < 0:
            raise FilterSettingError("value", f"must be >= 0, got {self.value}")
        if self.scope not in SCOPES:
            raise FilterSettingError("scope", f"must be one of {SCOPES}, got {self.scope!r}")


class FilterSettingError(ValueError):
    """A bad :class:`FilterConfig` value; ``field`` names the setting, ``reason`` the problem.

    The message reads ``filter.<field> <reason>``; the training config reports it as
    ``algorithm.filter.<field>``.
    """

    def __init__(self, field_name: str, reason: str):
        self.field, self.reason = field_name, reason
        super().__init__(f"filter.{field_name} {reason}")


@dataclass
class FilterResult:
    """Kept groups and the metrics to log."""

    kept: list[int]
    scale: float
    metrics: dict[str, float]


def group_values(
    records: Iterable[Any], metric: str, alive: Collection[tuple[int, int]] | None = None
) -> dict[int, list[float]]:
    """Per-group values that :func:`group_scores` scores, from episode records.

    Args:
        records: episode records (``group``, ``episode_index``, ``episode_return``,
            ``completion_tokens``).
        metric: ``reward_std`` / ``reward_mean`` (the episode return) or ``length``
            (completion tokens); ``entropy`` needs the trainer's forward pass.
        alive: the ``(group, episode_index)`` pairs that are in the update (the samples
            that survived :func:`ragen_train.batch.build_samples`); default: every record
            whose return is finite.  Other records do not count towards their group.

    Raises:
        ValueError: ``metric == "entropy"`` or unknown.
    """
    if metric not in ("reward_std", "reward_mean", "length"):
        raise ValueError(
            f"group_values: metric {metric!r} needs per-sample values (use group_scores directly)"
        )
    out: dict[int, list[float]] = {}
    for r in records:
        ret = r.episode_return
        if alive is not None and (r.group, r.episode_index) not in alive:
            continue
        if ret is None or not math.isfinite(ret):
            continue
        out.setdefault(r.group, []).append(
            float(r.completion_tokens) if metric == "length" else float(ret)
        )
    return out


def group_scores(values: dict[int, Sequence[float | None]], metric: str) -> np.ndarray:
    """Score of each group from its per-episode values (returns, entropies or lengths).

    ``reward_std`` is the population std of the group's finite returns (as RAGEN), snapped
    to 0 when at most :data:`~ragen_train.advantages.CONSTANT_GROUP_TOL`; the others are
    means of the finite values.  Non-finite values (NaN, inf, ``None``) are left out; the
    ``reward_std`` of a group with fewer than two finite values is 0, and so is the mean
    of a group with none.  Groups are indexed ``0..G-1`` in
    sorted order of their ids.

    Returns:
        ``(G,)`` float64 scores, all finite.
    """
    out = []
    for g in sorted(values):
        v = np.asarray([np.nan if x is None else x for x in values[g]], dtype=np.float64)
        v = v[np.isfinite(v)]
        if metric == "reward_std":
            std = float(v.std()) if v.size >= 2 else 0.0
            out.append(std if std > CONSTANT_GROUP_TOL else 0.0)
        else:
            out.append(float(v.mean()) if v.size else 0.0)
    return np.asarray(out, dtype=np.float64)


def select_groups(scores: np.ndarray, cfg: FilterConfig) -> FilterResult:
    """Apply the filter to ``scores`` (one per group, index = position).

    A non-finite score counts as 0 (:func:`group_scores` never returns one).

    Returns:
        kept group positions (ascending), the loss scale for the kept fraction
        ``ρ = kept / n`` (``1``, ``ρ`` or ``√ρ``), and metrics ``filter/*``.
    """
    scores = np.nan_to_num(np.asarray(scores, dtype=np.float64), nan=0.0, posinf=0.0, neginf=0.0)
    n = len(scores)
    zero = [i for i in range(n) if abs(scores[i]) <= CONSTANT_GROUP_TOL]
    candidates = list(range(n)) if cfg.include_zero else [i for i in range(n) if i not in set(zero)]
    kwargs = {"mode": cfg.top_p_mode, "eps": cfg.eps} if cfg.strategy == "top_p" else {}
    kept = sorted(STRATEGIES[cfg.strategy](scores, candidates, cfg.value, **kwargs)) if n else []
    return filter_result(scores, kept, cfg)


def filter_result(scores: np.ndarray, kept: Sequence[int], cfg: FilterConfig) -> FilterResult:
    """The :class:`FilterResult` of keeping positions ``kept`` of ``scores`` (finite, one per
    group): the loss scale for ``ρ = kept / n`` and the ``filter/*`` metrics.  Shared by
    :func:`select_groups` and the per-env filter (:func:`ragen_train.multienv.select_groups_per_env`)."""
    scores = np.asarray(scores, dtype=np.float64)
    kept = sorted(kept)
    n = len(scores)
    zero = [i for i in range(n) if abs(scores[i]) <= CONSTANT_GROUP_TOL]
    rho = len(kept) / n if n else 0.0
    scale = {"none": 1.0, "linear": rho, "sqrt": math.sqrt(rho)}[cfg.loss_scaling] if kept else 0.0
    chosen = scores[kept] if kept else np.zeros(0)
    metrics = {
        "filter/groups": float(n),
        "filter/kept": float(len(kept)),
        "filter/kept_ratio": rho,
        "filter/zero_score_groups": float(len(zero)),
        "filter/empty": float(not kept),
        "filter/score_mean": float(scores.mean()) if n else 0.0,
        "filter/chosen_score_mean": float(chosen.mean()) if len(chosen) else 0.0,
        "filter/loss_scale": float(scale),
    }
    return FilterResult(kept=kept, scale=scale, metrics=metrics)
