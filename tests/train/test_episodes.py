"""Which episodes a rank plays (:mod:`ragen_train.episodes`): every group of a training step
on exactly one rank, its members sharing the env seed the allocator gave it; validation
seeds 0..N-1 split over the ranks in whole chunks, each seed played once."""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen_train.config import load_config
from ragen_train.distributed import DistInfo
from ragen_train.episodes import train_specs_by_env, val_specs_by_env
from ragen_train.multienv import GroupAllocator, train_envs, val_envs


def _cfg(tmp_path: Path):
    return load_config(
        "tiny-bandit-grpo",
        [
            f"trainer.out_dir={tmp_path}",
            "env.train=ragen/Bandit-v0:1,ragen/Bandit-Pairs-v0:2",
            "rollout.env_groups=6",
            "rollout.group_size=3",
            "rollout.batch_size=4",
        ],
    )


@pytest.mark.parametrize("world", [1, 2, 4])
def test_every_group_of_a_step_is_played_once_with_the_allocated_env_and_seed(
    tmp_path: Path, world: int
) -> None:
    cfg = _cfg(tmp_path)
    envs = train_envs(cfg)
    plan = GroupAllocator([e.weight for e in envs], cfg.rollout.env_groups).groups_at(5)
    played = [
        (e, spec)
        for rank in range(world)
        for e, part in enumerate(
            train_specs_by_env(cfg, envs, plan, DistInfo(rank=rank, world_size=world))
        )
        for spec in part
    ]
    assert sorted(spec.index for _, spec in played) == list(range(6 * 3))
    for e, spec in played:
        assert (e, spec.seed) == plan[spec.group]
        assert spec.env_id == envs[e].id and spec.env_config["split"] == cfg.env.train_split
        assert spec.index == spec.group * 3 + spec.member


@pytest.mark.parametrize("world", [1, 3])
def test_validation_seeds_are_split_over_ranks_in_whole_chunks(tmp_path: Path, world: int) -> None:
    cfg = _cfg(tmp_path)
    envs = val_envs(cfg)
    per_rank = [
        val_specs_by_env(cfg, envs, "validation", 10, DistInfo(rank=rank, world_size=world))
        for rank in range(world)
    ]
    for e in range(len(envs)):
        seeds = sorted(sp.seed for parts in per_rank for sp in parts[e])
        assert seeds == list(range(10))
        for rank, parts in enumerate(per_rank):
            assert all((sp.index // 4) % world == rank for sp in parts[e])
            assert all(sp.group == sp.index == sp.seed and sp.member == 0 for sp in parts[e])
