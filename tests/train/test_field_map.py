"""Back-end settings generated from a field table (ragen_train/backends/field_map.py): the walk,
its refusal of a key set twice, and the small value transforms, against hand-computed values."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from ragen_train.backends.common import handling
from ragen_train.backends.field_map import (
    UNSET,
    SettingField,
    declared_keys,
    field_value,
    loss_normaliser,
    none_or,
    positive_or,
    sets,
    settings_from_table,
)

TABLE = {
    "optim.lr": sets("mapped", "learning_rate", {"learning_rate": lambda p: p.lr}),
    "optim.grad_clip": sets(
        "mapped", "max_grad_norm", {"max_grad_norm": lambda p: positive_or(p.clip, 0.0)}
    ),
    "algorithm.norm_len": sets(
        "mapped", "max_len or unset", {"max_len": lambda p: UNSET if p.norm is None else p.norm}
    ),
    "trainer.seed": sets(
        "mapped", "seed, data_seed", {"seed": lambda p: p.seed, "data_seed": lambda p: p.seed}
    ),
    "name": handling("ours", "our logger"),
}


def test_the_walk_sets_each_declared_key_from_its_producer_then_the_fixed_ones() -> None:
    plan = SimpleNamespace(lr=3e-4, clip=0.0, norm=None, seed=7)
    out = settings_from_table(TABLE, plan, (("optim", "adamw_torch"),))
    assert out == {
        "learning_rate": 3e-4,
        "max_grad_norm": 0.0,
        "seed": 7,
        "data_seed": 7,
        "optim": "adamw_torch",
    }  # max_len is UNSET: left to the back-end's default
    plan.norm, plan.clip = 512.0, 1.0
    out = settings_from_table(TABLE, plan)
    assert out["max_len"] == 512.0 and out["max_grad_norm"] == 1.0 and "optim" not in out


def test_entries_keep_their_handling_and_declare_their_keys() -> None:
    how = TABLE["trainer.seed"]
    assert isinstance(how, SettingField) and how.status == "mapped" and how.refused == ()
    assert declared_keys(TABLE) == {
        "learning_rate": "optim.lr",
        "max_grad_norm": "optim.grad_clip",
        "max_len": "algorithm.norm_len",
        "seed": "trainer.seed",
        "data_seed": "trainer.seed",
    }
    refusing = sets("mapped", "steps", {"steps": lambda p: 1}, "optim.mini_batches=3")
    assert refusing.refused == ("optim.mini_batches=3",)


def test_a_key_set_twice_is_a_table_error() -> None:
    twice = {**TABLE, "optim.beta1": sets("mapped", "x", {"seed": lambda p: 0})}
    with pytest.raises(ValueError, match="'seed' is set by both 'trainer.seed' and 'optim.beta1'"):
        declared_keys(twice)
    with pytest.raises(ValueError, match="'seed' is set by both"):
        settings_from_table(twice, SimpleNamespace(lr=1, clip=1, norm=None, seed=1))
    with pytest.raises(ValueError, match="'learning_rate' is fixed and also set"):
        settings_from_table(
            TABLE, SimpleNamespace(lr=1, clip=1, norm=None, seed=1), (("learning_rate", 2),)
        )


def test_zero_or_none_become_the_backends_off_value() -> None:
    assert positive_or(5, -1) == 5 and positive_or(0, -1) == -1 and positive_or(-2, None) is None
    assert positive_or(0.5, 1e9) == 0.5 and positive_or(0.0, 1e9) == 1e9
    assert none_or(None, 1e9) == 1e9 and none_or(3.0, 1e9) == 3.0 and none_or(0, 1e9) == 0


def test_loss_normaliser_is_norm_len_else_the_token_budget_of_an_episode() -> None:
    assert loss_normaliser(None, 100, 5) == 500.0  # 100 new tokens x 5 turns
    assert loss_normaliser(64, 100, 5) == 64.0
    assert loss_normaliser(None, 24, 0) == 24.0  # at least one turn
    assert isinstance(loss_normaliser(None, 3, 2), float)


def test_a_plain_key_copies_the_fields_own_value() -> None:
    cfg = SimpleNamespace(optim=SimpleNamespace(lr=2e-5, beta1=0.9))
    table = {
        "optim.lr": sets("mapped", "learning_rate", "learning_rate"),
        "optim.beta1": sets("mapped", "adam_beta1, twice", {"b1": None, "b1x2": lambda p: 1.8}),
    }
    assert table["optim.lr"].produces == (("learning_rate", None),)
    assert settings_from_table(table, SimpleNamespace(cfg=cfg)) == {
        "learning_rate": 2e-5,
        "b1": 0.9,
        "b1x2": 1.8,
    }
    assert field_value(cfg, "optim.beta1") == 0.9
    with pytest.raises(AttributeError):
        field_value(cfg, "optim.lrr")
