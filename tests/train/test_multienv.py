"""One StarPO run trains on several envs with weights, validates on
several envs, logs every episode metric per env, and filters per env or globally."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ragen_train.config import StarPOConfig, TrainConfigError, config_json_schema, load_config
from ragen_train.filtering import FilterConfig, group_scores, select_groups
from ragen_train.logger import read_metrics
from ragen_train.multienv import GroupAllocator, select_groups_per_env, train_envs, val_envs

TWO_ENVS = json.dumps(
    [
        {"id": "ragen/Sokoban-Easy-v0", "tag": "sokoban", "weight": 1},
        {"id": "ragen/FrozenLake-v0", "tag": "frozenlake", "weight": 1},
    ]
)
TWO_VAL = json.dumps(
    [
        {"id": "ragen/Sokoban-Easy-v0", "tag": "sokoban", "episodes": 3},
        {"id": "ragen/FrozenLake-v0", "tag": "frozenlake", "episodes": 2},
    ]
)


def two_env_cfg(tmp_path: Path, *extra: str) -> StarPOConfig:
    return load_config(
        "quickstart",
        [
            "env.config={}",
            f"env.train={TWO_ENVS}",
            f"env.val={TWO_VAL}",
            f"trainer.out_dir={tmp_path}",
            "rollout.env_groups=4",
            "rollout.group_size=2",
            "rollout.max_new_tokens=8",
            "rollout.max_turns=2",
            "trainer.val_every=1",
            "trainer.total_steps=1",
            "trainer.save_every=0",
            "trainer.loggers=jsonl",
            "trainer.collapse_every=0",
            "optim.micro_batch_size=8",
            "optim.lr=1e-3",
            *extra,
        ],
    )


def test_two_env_starpo_run_logs_per_env_metrics_and_validates_on_both(tmp_path: Path) -> None:
    """Must show: a two-env StarPO run on the tiny model logs per-env metrics and validates on both."""
    from ragen_train.trainer import StarPOTrainer

    trainer = StarPOTrainer(two_env_cfg(tmp_path))
    trainer.fit()
    rows = read_metrics(tmp_path / "metrics.jsonl")
    train = [r for r in rows if r["phase"] == "train"]
    val = [r for r in rows if r["phase"] == "val"]
    assert len(train) == 1 and len(val) == 2  # before training and after step 1
    t = train[0]
    for tag in ("sokoban", "frozenlake"):
        for metric in ("success", "return", "format_valid_rate", "pass@2", "in_group_reward_std"):
            assert f"train/{tag}/{metric}" in t, (tag, metric, sorted(t))
        assert t[f"filter/{tag}/groups"] == 2.0  # weights 1:1 over 4 groups
        for v in val:
            assert f"val/{tag}/success" in v and f"val/{tag}/return" in v
    # The plain keys are the means over all episodes (2 groups x 2 members per env in training;
    # 3 + 2 validation episodes).
    assert t["train/return"] == pytest.approx(
        (t["train/sokoban/return"] + t["train/frozenlake/return"]) / 2
    )
    v = val[-1]
    assert v["val/return"] == pytest.approx(
        (3 * v["val/sokoban/return"] + 2 * v["val/frozenlake/return"]) / 5
    )
    # Each env played its own seed stream with its own turn limits.
    records = trainer.rollout(1)
    assert {r.env_id for r in records} == {"ragen/Sokoban-Easy-v0", "ragen/FrozenLake-v0"}
    assert sorted({(r.env_id, r.seed) for r in records}) == [
        ("ragen/FrozenLake-v0", 2),
        ("ragen/FrozenLake-v0", 3),
        ("ragen/Sokoban-Easy-v0", 2),
        ("ragen/Sokoban-Easy-v0", 3),
    ]


def test_single_env_config_form_is_unchanged(tmp_path: Path) -> None:
    """Backwards compatible: no env.train / env.val = the one env, no per-env keys, old seeds."""
    cfg = load_config("quickstart", [f"trainer.out_dir={tmp_path}"])
    assert cfg.env.train == [] and cfg.env.val == []
    assert [(e.tag, e.id) for e in train_envs(cfg)] == [("Bandit-PairsAB-v0", cfg.env.id)]
    assert [e.id for e in val_envs(cfg)] == [cfg.env.id]
    alloc = GroupAllocator([1.0], 8)
    assert alloc.groups_at(3) == [(0, 3 * 8 + g) for g in range(8)]  # seed step * env_groups + g
    schema = config_json_schema()
    import jsonschema

    jsonschema.validate(cfg.to_dict(), schema)
    jsonschema.validate(two_env_cfg(tmp_path).to_dict(), schema)


def test_weights_set_the_share_of_groups_and_every_env_walks_its_own_seeds() -> None:
    alloc = GroupAllocator([3.0, 1.0], 8)
    steps = [alloc.groups_at(k) for k in range(5)]
    assert all([e for e, _ in s].count(0) == 6 for s in steps)  # 3:1 of 8 groups
    seeds0 = [seed for s in steps for e, seed in s if e == 0]
    assert seeds0 == list(range(30))  # no seed twice, none skipped
    small = GroupAllocator([0.9, 0.1], 8)
    counts = [[e for e, _ in small.groups_at(k)].count(1) for k in range(10)]
    assert sum(counts) == 8 and max(counts) == 1  # 10% of 80 groups, spread over the steps
    # The allocation is a function of the step alone (a resumed run plays the same groups).
    assert GroupAllocator([0.9, 0.1], 8).groups_at(7) == small.groups_at(7)


def test_filter_scope_per_env_ranks_each_envs_groups_apart() -> None:
    """A reward_std top-p selection ranked globally keeps only the large-reward env's groups;
    per env it keeps the most informative groups of each."""
    values = {
        0: [0.0, 10.0],
        1: [0.0, 8.0],
        2: [0.0, 1.0],
        3: [0.0, 0.5],
    }  # groups 0,1 Sokoban; 2,3 FrozenLake
    env_of_group = {0: 0, 1: 0, 2: 1, 3: 1}
    cfg = FilterConfig(strategy="top_p", value=0.5, metric="reward_std")
    global_kept = select_groups(group_scores(values, "reward_std"), cfg).kept
    assert global_kept == [0]
    kept, metrics, scale = select_groups_per_env(values, env_of_group, cfg)
    assert kept == {0, 2}
    assert metrics["filter/kept"] == 2 and metrics["filter/kept_ratio"] == 0.5 and scale == 1.0
    assert metrics["filter/score_mean"] == pytest.approx(np.mean([5.0, 4.0, 0.5, 0.25]))


def test_per_env_filter_scope_in_a_run(tmp_path: Path) -> None:
    from ragen_train.trainer import StarPOTrainer

    trainer = StarPOTrainer(
        two_env_cfg(
            tmp_path,
            "algorithm.filter.scope=per_env",
            "algorithm.filter.value=0.5",
            "trainer.val_every=0",
        )
    )
    metrics = trainer.train_step()
    assert metrics["filter/groups"] == 4.0
    for tag in ("sokoban", "frozenlake"):
        assert 0.0 <= metrics[f"filter/{tag}/kept_ratio"] <= 1.0


@pytest.mark.parametrize(
    "override, field",
    [
        ('env.train=[{"id": "ragen/Sokoban-v0"}, {"id": "ragen/Sokoban-v0"}]', "env.train[1].tag"),
        ('env.train=[{"id": "ragen/Sokoban-v0", "weight": 0}]', "env.train[0].weight"),
        ('env.train=[{"tag": "x"}]', "env.train[0].id"),
        ('env.train=[{"id": "ragen/Sokobann-v0"}]', "env.train[0].id"),
        (
            'env.val=[{"id": "ragen/Sokoban-v0", "config": {"risky_prob": 0.5}}]',
            "env.val[0].config.risky_prob",
        ),
        ('env.val=[{"id": "ragen/Sokoban-v0", "episodes": 0}]', "env.val[0].episodes"),
        ("algorithm.filter.scope=per_group", "algorithm.filter.scope"),
    ],
)
def test_bad_env_lists_name_the_entry(override: str, field: str) -> None:
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", [override])
    assert err.value.field == field, err.value


def test_short_form_of_the_env_lists() -> None:
    cfg = load_config(
        "quickstart",
        [
            "env.train=ragen/Sokoban-v0:3,ragen/FrozenLake-v0",
            "env.val=[ragen/Sokoban-v0:16, ragen/FrozenLake-v0]",
        ],
    )
    assert [(e.id, e.weight) for e in cfg.env.train] == [
        ("ragen/Sokoban-v0", 3.0),
        ("ragen/FrozenLake-v0", 1.0),
    ]
    assert [(e.tag, e.episodes) for e in val_envs(cfg)] == [
        ("Sokoban-v0", 16),
        ("FrozenLake-v0", None),
    ]
    with pytest.raises(TrainConfigError) as err:
        load_config("quickstart", ["env.train=ragen/Sokoban-v0:heavy"])
    assert err.value.field == "env.train[0]" and "<env id>:<weight>" in err.value.reason
