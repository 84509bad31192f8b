"""Aggregate statistics with uncertainty: means, standard errors, bootstrap intervals, pass@k.

Episodes of one group share an env seed and are correlated, so every interval treats
the *group* as the unit: the standard error is that of the mean over group means, and
the bootstrap resamples whole groups (a cluster bootstrap; Field & Welsh, "Bootstrapping
clustered data", JRSS-B 2007).  With group size 1 both reduce to the usual i.i.d.
formulas.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0


def _group_values(values: Iterable[float], groups: Sequence[int]) -> np.ndarray:
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


def mcnemar_exact(before_only: int, after_only: int) -> float:
    """Two-sided exact McNemar test of paired binary outcomes (McNemar 1947, Psychometrika
    12:153; exact form: the binomial sign test on the discordant pairs).

    Under the null hypothesis that the success probability is the same before and after, each
    discordant pair (success on one side only) is equally likely to fall either way, so
    ``after_only ~ Binomial(before_only + after_only, 1/2)``; the p-value is
    ``min(1, 2 * P[X <= min(b, c)])`` with ``X ~ Binomial(b + c, 1/2)``.

    Args:
        before_only: pairs that succeeded before and failed after (``b``, ``>= 0``).
        after_only: pairs that failed before and succeeded after (``c``, ``>= 0``).

    Returns:
        The two-sided p-value in ``(0, 1]``; ``1.0`` when there is no discordant pair.

    Raises:
        ValueError: a negative count.
    """
    if before_only < 0 or after_only < 0:
        raise ValueError(f"mcnemar_exact needs counts >= 0, got {before_only}, {after_only}")
    n = before_only + after_only
    if n == 0:
        return 1.0
    k = min(before_only, after_only)
    tail = sum(math.comb(n, i) for i in range(k + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


def paired_bootstrap_diff(
    before: Sequence[float],
    after: Sequence[float],
    *,
    resamples: int = 10_000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float, float]:
    """Mean paired difference ``after - before`` with a percentile bootstrap interval that
    resamples *pairs* (Efron & Tibshirani 1993, "An Introduction to the Bootstrap", ch. 13).

    Args:
        before, after: one value per paired unit (an episode seed), same length ``n >= 1``.
        resamples: bootstrap resamples.
        seed: the NumPy generator seed (the interval is reproducible).
        level: the interval's coverage, in ``(0, 1)``.

    Returns:
        ``(mean_difference, low, high)``.

    Raises:
        ValueError: different lengths, no pairs, or ``level`` outside ``(0, 1)``.
    """
    b = np.asarray(before, dtype=np.float64)
    a = np.asarray(after, dtype=np.float64)
    if b.shape != a.shape or b.ndim != 1 or b.size == 0:
        raise ValueError(
            f"paired_bootstrap_diff needs two equal, non-empty 1-d sequences, got {b.shape}, {a.shape}"
        )
    if not 0.0 < level < 1.0:
        raise ValueError(f"level must be in (0, 1), got {level}")
    d = a - b
    idx = np.random.default_rng(seed).integers(0, d.size, size=(resamples, d.size))
    means = d[idx].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means, [tail, 1.0 - tail])
    return float(d.mean()), float(low), float(high)


def _pairs_summary(pairs: list[tuple[dict, dict]]) -> dict:
    b = sum(x["success"] and not y["success"] for x, y in pairs)
    c = sum(y["success"] and not x["success"] for x, y in pairs)
    out = {
        "pairs": len(pairs),
        "both": sum(x["success"] and y["success"] for x, y in pairs),
        "before_only": b,
        "after_only": c,
        "neither": sum(not x["success"] and not y["success"] for x, y in pairs),
        "mcnemar_p": mcnemar_exact(b, c),
    }
    if pairs:
        diff, low, high = paired_bootstrap_diff(
            [float(x["success"]) for x, _ in pairs], [float(y["success"]) for _, y in pairs]
        )
        out.update(success_before=sum(x["success"] for x, _ in pairs) / len(pairs))
        out.update(success_after=sum(y["success"] for _, y in pairs) / len(pairs))
        out.update(diff=diff, diff_ci95=[low, high])
    return out


def _rate(rows: list[dict]) -> dict:
    n = len(rows)
    k = sum(r["success"] for r in rows)
    return {
        "episodes": n,
        "successes": k,
        "success": k / n if n else None,
        "ci95": list(wilson_interval(k / n, n)) if n else None,
    }


def paired_comparison(before: list[dict], after: list[dict]) -> dict:
    """The paired before/after comparison of two evaluations on the same seeds.

    Rows are per-episode outcome dicts (``env_id``, ``seed``, optional ``member`` — the
    episode's index within its seed group, default 0 —, ``success``, ``well_formed``: every
    turn's answer parsed), matched on ``(env_id, seed, member)``.  ``all``: every
    matched seed; ``well_formed_both``: only seeds whose episode was well-formed before *and*
    after (success among well-formed answers, still paired).  Each gives the 2×2 counts, the
    exact McNemar p-value (:func:`mcnemar_exact`) and the mean success
    difference with a 95% paired-bootstrap interval.  ``well_formed_rate`` gives the
    (unpaired) success among each side's well-formed episodes with Wilson intervals.

    Raises:
        ValueError: a seed evaluated on one side only.
    """
    key = lambda r: (r["env_id"], r["seed"], r.get("member", 0))  # noqa: E731
    b_by, a_by = {key(r): r for r in before}, {key(r): r for r in after}
    if set(b_by) != set(a_by):
        raise ValueError(f"before/after seeds differ: {sorted(set(b_by) ^ set(a_by))[:5]}")
    pairs = [(b_by[k], a_by[k]) for k in sorted(b_by)]
    return {
        "all": _pairs_summary(pairs),
        "well_formed_both": _pairs_summary(
            [(x, y) for x, y in pairs if x["well_formed"] and y["well_formed"]]
        ),
        "well_formed_rate": {
            "before": _rate([x for x, _ in pairs if x["well_formed"]]),
            "after": _rate([y for _, y in pairs if y["well_formed"]]),
        },
        "well_formed_share": {
            "before": sum(x["well_formed"] for x, _ in pairs) / len(pairs) if pairs else None,
            "after": sum(y["well_formed"] for _, y in pairs) / len(pairs) if pairs else None,
        },
    }
