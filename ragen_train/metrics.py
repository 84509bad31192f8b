"""Metric accumulation for :class:`~ragen_train.trainer.StarPOTrainer`: episode summaries
and update statistics, reduced over ranks.

* :func:`episode_metrics` — what a batch of episodes logs (means, status shares, pass@k);
* :func:`reduce_means` / :func:`per_env_metrics` — those summaries averaged over ranks;
* :class:`MetricAccumulator` — the update's losses and statistics over micro-batches,
  mini-batches and ranks.

Every reduction is a collective when the run is distributed: every rank must call it, with
metrics in any order (keys are gathered and sorted first).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragen_bench.diagnostics.text_stats import degenerate_rate, record_responses
from ragen_bench.records import EpisodeRecord
from ragen_bench.stats import pass_at_k

from .distributed import DistInfo, all_gather_object, all_reduce_max, all_reduce_sum


def episode_metrics(
    records: Sequence[EpisodeRecord], prefix: str, group_size: int | None = None
) -> dict[str, float]:
    """Means of per-episode metrics, status shares, pass@k over groups and ``degenerate_rate``
    (the share of responses, over every turn, that :func:`~ragen_bench.diagnostics.is_degenerate`)."""
    if not records:
        return {}
    out: dict[str, float] = {}
    keys = records[0].metrics().keys()
    for k in keys:
        out[f"{prefix}/{k}"] = float(np.mean([r.metrics()[k] for r in records]))
    degenerate = degenerate_rate(record_responses(records))  # every mode, think or not
    if degenerate is not None:
        out[f"{prefix}/degenerate_rate"] = degenerate
    statuses: dict[str, int] = defaultdict(int)
    for r in records:
        statuses[r.status] += 1
    for s, n in statuses.items():
        out[f"{prefix}/status_{s}"] = n / len(records)
    if group_size and group_size > 1:
        groups: dict[int, list[bool]] = defaultdict(list)
        for r in records:
            groups[r.group].append(r.success)
        vals = [pass_at_k(len(v), sum(v), len(v)) for v in groups.values()]
        out[f"{prefix}/pass@{group_size}"] = float(np.mean(vals))
        stds = [float(np.std([x.episode_return for x in records if x.group == g])) for g in groups]
        out[f"{prefix}/in_group_reward_std"] = float(np.mean(stds))
    return out


def _all_keys(keys: Any, info: DistInfo) -> list[str]:
    """The sorted union of every rank's keys (a collective when distributed)."""
    if not info.enabled:
        return sorted(keys)
    return sorted(set().union(*all_gather_object(sorted(keys), info)))


def reduce_means(metrics: dict[str, float], weight: float, info: DistInfo) -> dict[str, float]:
    """Each metric averaged over ranks, rank ``r``'s value weighted by its ``weight`` (e.g.
    its episode count); a key a rank lacks counts as 0 there.  Unchanged on one process."""
    if not info.enabled:
        return metrics
    keys = _all_keys(metrics, info)
    total = all_reduce_sum(weight, info)
    return {k: all_reduce_sum(metrics.get(k, 0.0) * weight, info) / max(total, 1.0) for k in keys}


def per_env_metrics(
    parts: Sequence[Sequence[EpisodeRecord]],
    envs: Sequence[Any],
    prefix: str,
    info: DistInfo,
    group_size: int | None = None,
) -> dict[str, float]:
    """``<prefix>/<tag>/<metric>``: :func:`episode_metrics` of each env's records (``parts[i]``
    belongs to ``envs[i]``, which has a ``tag``), reduced over ranks by :func:`reduce_means`."""
    out: dict[str, float] = {}
    for env, part in zip(envs, parts):  # the same order on every rank (collectives)
        out |= reduce_means(
            episode_metrics(part, f"{prefix}/{env.tag}", group_size), len(part), info
        )
    return out


class MetricAccumulator:
    """Accumulates update metrics and reduces them over ranks.

    * ``loss``: values already normalised by global denominators; summed over
      micro-batches and ranks they give the mini-batch value; averaged over mini-batches.
    * ``tok``: token-weighted sums and counts.
    * ``step_stat``: one value per optimizer step (identical on every rank); averaged —
      except keys ending in ``_max``: the maximum over all values and ranks, and
      ``actor/nonfinite_skip``: summed (a count of skipped steps).
    * ``total``: summed over ranks.
    """

    def __init__(self) -> None:
        self.losses: dict[str, float] = defaultdict(float)
        self.minibatches = 0
        self.toks: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0])
        self.steps: dict[str, list[float]] = defaultdict(list)
        self.totals: dict[str, float] = defaultdict(float)

    def loss(self, key: str, value: float) -> None:
        """Add one micro-batch's share of a mini-batch loss."""
        self.losses[key] += value

    def end_minibatch(self) -> None:
        """Count one finished mini-batch (the divisor of every ``loss``)."""
        self.minibatches += 1

    def tok(self, key: str, weighted_sum: float, count: float) -> None:
        """Add a token-weighted sum and its token count."""
        self.toks[key][0] += weighted_sum
        self.toks[key][1] += count

    def step_stat(self, key: str, value: float) -> None:
        """Record one optimizer step's value."""
        self.steps[key].append(value)

    def total(self, key: str, value: float) -> None:
        """Add to a count summed over ranks."""
        self.totals[key] += value

    def reduce(self, info: DistInfo) -> dict[str, float]:
        """Every metric reduced over ranks as the class describes (a collective when
        distributed: every rank must call it)."""
        out: dict[str, float] = {}
        for k in _all_keys(self.losses, info):
            out[k] = all_reduce_sum(self.losses.get(k, 0.0), info) / max(self.minibatches, 1)
        for k in _all_keys(self.toks, info):
            s, c = self.toks[k] if k in self.toks else (0.0, 0.0)
            c_all = all_reduce_sum(c, info)
            out[k] = all_reduce_sum(s, info) / c_all if c_all else 0.0
        for k in _all_keys(self.steps, info):
            vals = self.steps.get(k, [])
            if k.endswith("_max"):  # a maximum over micro-batches and ranks
                out[k] = all_reduce_max(max(vals, default=0.0), info)
            elif vals:
                out[k] = (
                    float(np.mean(vals)) if k != "actor/nonfinite_skip" else float(np.sum(vals))
                )
        for k, v in self.totals.items():
            out[k] = all_reduce_sum(v, info)
        return out


__all__ = ["MetricAccumulator", "episode_metrics", "per_env_metrics", "reduce_means"]
