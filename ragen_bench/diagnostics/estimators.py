"""Estimators on the cross log-likelihood matrix ℓ (pure numpy).

``ℓ`` has one row per reasoning sample ``z_i`` and one column per input ``x_j``
(``N × M``); ``own[i]`` is the column of the input ``z_i`` was sampled from.  The
definitions are RAGEN-2's (arXiv 2604.06268):

* matched_i = ℓ_{i, own(i)}                                  (log p(z_i | x_i))
* marginal_i = logsumexp_j ℓ_ij − log M                      (log of the mixture
  p̂(z_i) = (1/M) Σ_j p(z_i | x_j): the marginal under the batch's empirical, uniform
  distribution over the M columns)
* MI estimate Î(X;Z) = mean_i(matched_i − marginal_i)
* conditional entropy estimate Ĥ(Z|X) = −mean_i(matched_i)
* reasoning (marginal) entropy estimate Ĥ(Z) = −mean_i(marginal_i)
* upper bound log M (each term matched_i − marginal_i <= log M because
  logsumexp_j ℓ_ij >= ℓ_{i,own(i)}), so Î ∈ (−∞, log M]
* marginal_std = population standard deviation of marginal_i
* z-score = mean_i((matched_i − marginal_i) / σ) with σ = max(marginal_std, floor)

Applied to the per-sequence matrix (sums over ``z``'s tokens) they give the ``_seq``
metrics; applied to the per-token matrix (means over ``z``'s tokens) the per-token ones.

Numerics: everything is computed in float64 whatever the input dtype; logsumexp
subtracts the row maximum, so entries far below it (``−1000`` next to ``−10``) just
contribute ``exp(−990) ≈ 0`` instead of turning the sum into ``0`` and its log into
``−inf`` or NaN, and the marginal is evaluated as ``max + (log Σ exp(ℓ − max) − log M)``
so that a row of equal values gives ``marginal == matched`` bit for bit (MI exactly 0).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

#: The retrieval cut-offs RAGEN reports (accuracy@1 plus @2, @4, @8).
DEFAULT_KS: tuple[int, ...] = (1, 2, 4, 8)

#: Default floor of the marginal standard deviation in the z-score (RAGEN's std_eps).
DEFAULT_STD_FLOOR = 1e-3


def as_matrix(ell: np.ndarray | Sequence[Sequence[float]]) -> np.ndarray:
    """``ell`` as a finite float64 ``(N, M)`` array.

    Raises:
        ValueError: not two-dimensional, empty, or containing NaN / ±inf.
    """
    a = np.asarray(ell, dtype=np.float64)
    if a.ndim != 2 or a.shape[0] == 0 or a.shape[1] == 0:
        raise ValueError(f"ℓ must be a non-empty (N, M) matrix, got shape {a.shape}")
    if not np.all(np.isfinite(a)):
        raise ValueError("ℓ must be finite (no NaN or inf)")
    return a


def own_columns(n_rows: int, n_cols: int, own: Sequence[int] | np.ndarray | None) -> np.ndarray:
    """``own`` as an int array; ``None`` means the diagonal (needs ``N == M``).

    Raises:
        ValueError: wrong length, out-of-range index, or ``None`` with ``N != M``.
    """
    if own is None:
        if n_rows != n_cols:
            raise ValueError(f"own is required when ℓ is not square ({n_rows} × {n_cols})")
        return np.arange(n_rows)
    o = np.asarray(own, dtype=np.int64)
    if o.shape != (n_rows,):
        raise ValueError(f"own must have shape ({n_rows},), got {o.shape}")
    if o.size and (o.min() < 0 or o.max() >= n_cols):
        raise ValueError("own entries must be column indices of ℓ")
    return o


def log_mean_exp(ell: np.ndarray) -> np.ndarray:
    """Row-wise ``log((1/M) Σ_j exp(ℓ_ij))`` in float64, shape ``(N,)``.

    Computed as ``m + (log Σ_j exp(ℓ_ij − m) − log M)`` with ``m`` the row maximum: no
    overflow or underflow, and exactly ``m`` for a constant row.
    """
    a = as_matrix(ell)
    m = a.max(axis=1)
    s = np.exp(a - m[:, None]).sum(axis=1)
    return m + (np.log(s) - math.log(a.shape[1]))


@dataclass(frozen=True)
class MIEstimate:
    """Result of :func:`mi_estimate` (all in nats).

    Attributes:
        matched: ``(N,)`` ℓ_{i,own(i)}.
        marginal: ``(N,)`` logsumexp_j ℓ_ij − log M.
        mi: mean(matched − marginal), the MI estimate.
        conditional_entropy: −mean(matched).
        marginal_entropy: −mean(marginal) (RAGEN's ``reasoning_entropy_est``).
        upper_bound: log M.
        marginal_std: population std of ``marginal``.
        zscore: mean((matched − marginal) / max(marginal_std, std_floor)).
    """

    matched: np.ndarray
    marginal: np.ndarray
    mi: float
    conditional_entropy: float
    marginal_entropy: float
    upper_bound: float
    marginal_std: float
    zscore: float


def zscore(
    matched: np.ndarray, marginal: np.ndarray, std: float, std_floor: float = DEFAULT_STD_FLOOR
) -> float:
    """mean((matched − marginal) / max(std, std_floor)).

    RAGEN's code divides by ``std + 1e-3``; we use a floor instead, which
    leaves the value unchanged whenever the spread is meaningful (std >= floor) and
    bounds it when the marginals are all equal.
    """
    if std_floor <= 0:
        raise ValueError("std_floor must be > 0")
    return float(
        np.mean(
            (np.asarray(matched, np.float64) - np.asarray(marginal, np.float64))
            / max(std, std_floor)
        )
    )


def mi_estimate(
    ell: np.ndarray | Sequence[Sequence[float]],
    own: Sequence[int] | np.ndarray | None = None,
    *,
    std_floor: float = DEFAULT_STD_FLOOR,
) -> MIEstimate:
    """The MI / entropy estimators of the module docstring on one matrix.

    Args:
        ell: ``(N, M)`` log-likelihoods (per-sequence sums or per-token means), any float dtype.
        own: ``(N,)`` own column per row; ``None`` for the diagonal (``N == M``).
        std_floor: floor of the std in the z-score.

    Raises:
        ValueError: see :func:`as_matrix` and :func:`own_columns`.
    """
    a = as_matrix(ell)
    o = own_columns(a.shape[0], a.shape[1], own)
    matched = a[np.arange(a.shape[0]), o]
    marginal = log_mean_exp(a)
    gap = matched - marginal
    std = float(np.std(marginal))  # population std (ddof=0), as RAGEN
    return MIEstimate(
        matched=matched,
        marginal=marginal,
        mi=float(np.mean(gap)),
        conditional_entropy=float(-np.mean(matched)),
        marginal_entropy=float(-np.mean(marginal)),
        upper_bound=math.log(a.shape[1]),
        marginal_std=std,
        zscore=zscore(matched, marginal, std, std_floor),
    )


def _signature_ids(n_cols: int, signatures: Sequence[Hashable] | None) -> np.ndarray:
    if signatures is None:
        return np.arange(n_cols)
    if len(signatures) != n_cols:
        raise ValueError(f"signatures has {len(signatures)} entries for {n_cols} columns")
    ids: dict[Hashable, int] = {}
    return np.array([ids.setdefault(s, len(ids)) for s in signatures], dtype=np.int64)


def _hit_probability(n_total: int, n_good: int, k: int) -> float:
    """P(at least one of ``n_good`` marked items among ``k`` drawn without replacement from ``n_total``)."""
    if k <= 0 or n_good <= 0:
        return 0.0
    if n_total - n_good < k:
        return 1.0
    if k == 1:
        return n_good / n_total
    return 1.0 - math.comb(n_total - n_good, k) / math.comb(n_total, k)


@dataclass(frozen=True)
class Retrieval:
    """Retrieval accuracy at one cut-off ``k``.

    Attributes:
        k: the requested cut-off; ``k_eff = min(k, M)`` is used.
        accuracy: mean over rows of P(a column with the row's own prompt signature is
            among the ``k`` highest-scoring columns), ties broken uniformly at random
            (so the value is an expectation, exact, never an artefact of column order).
        chance: the same probability for a uniformly random ranking of the columns,
            averaged over rows: 1 − C(M − c_i, k)/C(M, k) with c_i the number of columns
            that share row i's signature (for k = 1: c_i / M, RAGEN's chance level).
    """

    k: int
    accuracy: float
    chance: float

    @property
    def above_chance(self) -> float:
        return self.accuracy - self.chance


def retrieval(
    ell: np.ndarray | Sequence[Sequence[float]],
    own: Sequence[int] | np.ndarray | None = None,
    *,
    signatures: Sequence[Hashable] | None = None,
    ks: Sequence[int] = DEFAULT_KS,
) -> dict[int, Retrieval]:
    """Retrieval accuracy @k with a chance level that accounts for identical prompts.

    Row ``i`` counts as retrieved at ``k`` when one of the ``k`` columns with the highest
    ℓ_ij has the same prompt signature as its own column (columns holding identical
    prompts are interchangeable; RAGEN-2, arXiv 2604.06268).  Ties at the cut-off are
    resolved by exact expectation over a uniformly random tie-break.

    Args:
        ell: ``(N, M)`` log-likelihoods.  Per-token and per-sequence matrices rank
            columns identically (a row's entries share one length), so either works.
        own: own column per row (``None``: the diagonal).
        signatures: ``(M,)`` hashable prompt signature per column (e.g. the tuple of
            token ids); ``None`` means all columns differ.
        ks: cut-offs, each >= 1.

    Returns:
        ``{k: Retrieval}``.

    Raises:
        ValueError: bad shapes, or a cut-off < 1.
    """
    a = as_matrix(ell)
    n, m = a.shape
    o = own_columns(n, m, own)
    sig = _signature_ids(m, signatures)
    if any(int(k) < 1 for k in ks):
        raise ValueError("retrieval cut-offs must be >= 1")
    out: dict[int, Retrieval] = {}
    for k in ks:
        k_eff = min(int(k), m)
        acc = 0.0
        chance = 0.0
        for i in range(n):
            row = a[i]
            good = sig == sig[o[i]]
            chance += _hit_probability(m, int(good.sum()), k_eff)
            cut = np.sort(row)[::-1][k_eff - 1]  # the k-th largest value
            above = row > cut
            tied = row == cut
            if np.any(good & above):
                acc += 1.0
                continue
            need = k_eff - int(above.sum())
            acc += _hit_probability(int(tied.sum()), int((good & tied).sum()), need)
        out[int(k)] = Retrieval(int(k), acc / n, chance / n)
    return out
