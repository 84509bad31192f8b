"""Aggregate statistics with uncertainty: means, standard errors, bootstrap intervals, pass@k.

Episodes of one group share an env seed and are correlated, so every interval treats
the *group* as the unit: the standard error is that of the mean over group means, and
the bootstrap resamples whole groups (a cluster bootstrap; Field & Welsh, "Bootstrapping
clustered data", JRSS-B 2007).  With group size 1 both reduce to the usual i.i.d.
formulas.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def _group_values(values: Sequence[float], groups: Sequence[int]) -> np.ndarray:
    order: dict[int, list[float]] = {}
    for v, g in zip(values, groups):
        order.setdefault(int(g), []).append(float(v))
    return np.array([np.mean(vs) for _, vs in sorted(order.items())], dtype=np.float64)


def mean_with_uncertainty(
    values: Sequence[float],
    groups: Sequence[int] | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = BOOTSTRAP_SEED,
) -> dict[str, Any]:
    """Mean, standard error and a 95% percentile-bootstrap interval.

    Args:
        values: one value per episode.
        groups: group index per episode (``None``: every episode its own group).
        resamples: bootstrap resamples.
        seed: bootstrap RNG seed (fixed so summaries are reproducible).

    Returns:
        ``{"mean", "stderr", "ci95": [lo, hi], "n"}`` where ``n`` is the number of
        episodes; ``stderr`` is ``std(group means, ddof=1) / sqrt(#groups)`` (0 with one
        group).  Empty input gives ``mean = None``.
    """
    vals = np.asarray(list(values), dtype=np.float64)
    if vals.size == 0:
        return {"mean": None, "stderr": None, "ci95": [None, None], "n": 0}
    gm = vals if groups is None else _group_values(vals, groups)
    k = gm.size
    mean = float(vals.mean())
    stderr = float(gm.std(ddof=1) / math.sqrt(k)) if k > 1 else 0.0
    if k > 1:
        rng = np.random.default_rng(seed)
        idx = rng.integers(0, k, size=(resamples, k))
        boots = gm[idx].mean(axis=1)
        lo, hi = np.percentile(boots, [2.5, 97.5])
        ci = [float(lo), float(hi)]
    else:
        ci = [mean, mean]
    return {"mean": mean, "stderr": stderr, "ci95": ci, "n": int(vals.size)}


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one group of ``n`` samples with ``c`` successes.

    ``1 - C(n-c, k) / C(n, k)`` (Chen et al., "Evaluating Large Language Models Trained
    on Code", arXiv 2107.03374, eq. 1).

    Raises:
        ValueError: ``k`` is not in ``1..n`` or ``c`` not in ``0..n``.
    """
    if not 1 <= k <= n:
        raise ValueError(f"k must be in 1..{n}, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"c must be in 0..{n}, got {c}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k_over_groups(
    successes: Mapping[int, Sequence[bool]], ks: Sequence[int], **kw: Any
) -> dict[str, Any]:
    """pass@k for each ``k`` in ``ks``, averaged over groups, with uncertainty over groups.

    Groups smaller than ``k`` are skipped for that ``k``.
    """
    out: dict[str, Any] = {}
    for k in ks:
        per_group = [
            pass_at_k(len(s), sum(map(bool, s)), k) for s in successes.values() if len(s) >= k
        ]
        if per_group:
            out[f"pass@{k}"] = mean_with_uncertainty(per_group, **kw)
    return out


def wilson_interval(share: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion (Wilson 1927, JASA 22:209).

    Args:
        share: the observed share of successes in ``[0, 1]``.
        n: the number of independent trials (``>= 1``).
        z: the normal quantile (1.96: a 95% interval).

    Returns:
        ``(low, high)`` within ``[0, 1]``.

    Raises:
        ValueError: ``n < 1`` or ``share`` outside ``[0, 1]``.
    """
    if n < 1 or not 0.0 <= share <= 1.0:
        raise ValueError(f"wilson_interval needs n >= 1 and 0 <= share <= 1, got {share}, {n}")
    z2 = z * z
    centre = (share + z2 / (2 * n)) / (1 + z2 / n)
    half = z * math.sqrt(share * (1 - share) / n + z2 / (4 * n * n)) / (1 + z2 / n)
    return max(0.0, centre - half), min(1.0, centre + half)
