"""Which episodes this rank plays: a training step's groups and the validation chunks.

Every spec comes from :func:`ragen_bench.rollout.make_specs`, which owns the grouping
(index, seed, group, member).  Training (RAGEN, arXiv 2504.20073, section 3): group ``g`` of
step ``k`` is played by rank ``g mod W`` (:func:`~ragen_train.distributed.groups_for_rank`)
on the env and seed that :class:`~ragen_train.multienv.GroupAllocator` hands it (one env:
seed ``k · env_groups + g``), its ``group_size`` members sharing the seed, episode indices
``g · group_size + m``.  Validation: seeds ``0..N-1`` of the split, one group per episode,
in chunks of ``rollout.batch_size`` episodes, chunk ``c`` on rank ``c mod W``; so the
metrics do not depend on the number of processes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ragen_bench.rollout import EpisodeSpec, make_specs

from . import distributed as dist_utils
from .config import StarPOConfig


def split_config(base: dict[str, Any], split: str) -> dict[str, Any]:
    """The env config ``base`` on data split / seed stream ``split``."""
    return {**base, "split": split}


def train_specs_by_env(
    cfg: StarPOConfig, envs: Sequence[Any], plan: Sequence[tuple[int, int]], dist: Any
) -> list[list[EpisodeSpec]]:
    """This rank's episodes of one training step, ``[env][i]``.

    Args:
        cfg: the run config (``rollout.env_groups``, ``rollout.group_size``, ``env.train_split``).
        envs: the training envs (:func:`~ragen_train.multienv.train_envs`).
        plan: ``(env index, env seed)`` of every group of the step
            (:meth:`~ragen_train.multienv.GroupAllocator.groups_at`).
        dist: the process group state (:func:`ragen_train.distributed.init`).
    """
    r = cfg.rollout
    specs: list[list[EpisodeSpec]] = [[] for _ in envs]
    for g in dist_utils.groups_for_rank(r.env_groups, dist):
        e, seed = plan[g]
        specs[e] += make_specs(
            envs[e].id,
            episodes=r.group_size,
            group_size=r.group_size,
            seed=seed,
            env_config=split_config(envs[e].config, cfg.env.train_split),
            start_index=g * r.group_size,
            first_group=g,
        )
    return specs


def val_specs_by_env(
    cfg: StarPOConfig, envs: Sequence[Any], split: str, episodes: int | None, dist: Any
) -> list[list[EpisodeSpec]]:
    """This rank's validation episodes on ``split``, ``[env][i]``: seeds ``0..N-1`` per env
    (``N``: ``episodes``, else the env's own count, else ``trainer.val_episodes``), the
    chunks of ``rollout.batch_size`` episodes of this rank.

    Args:
        envs: the validation envs (:func:`~ragen_train.multienv.val_envs`).
        dist: the process group state (:func:`ragen_train.distributed.init`).
    """
    batch = max(1, cfg.rollout.batch_size)
    return [
        [
            sp
            for sp in make_specs(
                e.id,
                episodes=episodes or e.episodes or cfg.trainer.val_episodes,
                env_config=split_config(e.config, split),
            )
            if (sp.index // batch) % dist.world_size == dist.rank
        ]
        for e in envs
    ]


__all__ = ["split_config", "train_specs_by_env", "val_specs_by_env"]
