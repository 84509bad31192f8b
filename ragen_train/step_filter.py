"""Which groups of a training step enter the update: the filter over all ranks.

Each rank scores the groups it played (:func:`~ragen_train.filtering.group_values`, or the
mean token entropy of each episode for ``metric=entropy``), the scores are gathered from
every rank, and every rank then selects from the same merged scores, so the kept set is the
same everywhere (:func:`~ragen_train.filtering.select_groups`, or per env with
:func:`~ragen_train.multienv.select_groups_per_env` for ``scope=per_env``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import numpy as np

from ragen_bench.records import EpisodeRecord

from . import distributed as dist_utils
from .batch import Sample
from .filtering import FilterConfig, group_scores, group_values, select_groups
from .multienv import per_env_kept, select_groups_per_env


def filter_step(
    samples: list[Sample],
    records: list[EpisodeRecord],
    cfg: FilterConfig,
    env_of_group: dict[int, int],
    dist: Any,
    envs: Sequence[Any] | None = None,
) -> tuple[list[Sample], dict[str, float], float]:
    """The kept samples of this rank, the ``filter/*`` metrics and the loss scale.

    Only the episodes that survived :func:`~ragen_train.batch.build_samples` count
    towards their group (a NaN-reward episode is in no update, so it scores nothing).

    Args:
        samples: this rank's samples (with ``entropy`` filled for ``metric=entropy``).
        records: this rank's episodes of the step.
        cfg: the filter (``algorithm.filter``).
        env_of_group: the training env index of every group of the step.
        dist: the process group state (:func:`ragen_train.distributed.init`).
        envs: the training envs when the run lists several (adds the per-env kept counts
            of :func:`~ragen_train.multienv.per_env_kept`); ``None`` for one env.
    """
    per_group: dict[int, list[float]] = defaultdict(list)
    if cfg.metric != "entropy":
        alive = {(s.group, s.episode) for s in samples}
        per_group.update(group_values(records, cfg.metric, alive=alive))
    else:
        ent: dict[tuple[int, int], list[float]] = defaultdict(list)
        for s in samples:
            ent[(s.group, s.episode)].append(s.entropy)
        for (g, _), v in ent.items():
            per_group[g].append(float(np.nanmean(v)))
    merged: dict[int, list[float]] = {}
    for part in dist_utils.all_gather_object(dict(per_group), dist):
        merged.update(part)
    groups = sorted(merged)
    if cfg.scope == "per_env":
        kept_ids, fmetrics, scale = select_groups_per_env(merged, env_of_group, cfg)
    else:
        scores = group_scores(merged, cfg.metric) if groups else np.zeros(0)
        result = select_groups(scores, cfg)
        kept_ids, fmetrics, scale = {groups[i] for i in result.kept}, result.metrics, result.scale
    if envs is not None:
        fmetrics = fmetrics | per_env_kept(kept_ids, env_of_group, envs)
    return [s for s in samples if s.group in kept_ids], fmetrics, scale


__all__ = ["filter_step"]
