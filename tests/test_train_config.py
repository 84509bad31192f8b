"""Training configs: presets, key=value overrides, errors that name the field, the JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from ragen_train.config import ConfigError, StarPOConfig, apply_overrides, config_json_schema, load_config
from ragen_train.presets import PRESETS

SCHEMA_PATH = Path(__file__).resolve().parent.parent / "schemas" / "train_config.schema.json"


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_every_preset_validates_against_the_schema(name: str) -> None:
    cfg = load_config(name)
    jsonschema.validate(cfg.to_dict(), json.loads(SCHEMA_PATH.read_text()))


def test_checked_in_schema_matches_the_dataclasses() -> None:
    assert json.loads(SCHEMA_PATH.read_text()) == config_json_schema(), \
        "regenerate: python -c 'import json; from ragen_train.config import config_json_schema; " \
        "print(json.dumps(config_json_schema(), indent=2))' > schemas/train_config.schema.json"


def test_overrides_are_typed() -> None:
    cfg = load_config("quickstart", ["optim.lr=1e-5", "rollout.env_groups=3", "algorithm.dual_clip=null",
                                     "trainer.loggers=jsonl,tensorboard", "env.config={\"split_by\": \"names\"}",
                                     "rollout.enable_think=false"])
    assert cfg.optim.lr == 1e-5 and cfg.rollout.env_groups == 3 and cfg.algorithm.dual_clip is None
    assert cfg.trainer.loggers == ["jsonl", "tensorboard"]
    assert cfg.env.config == {"split_by": "names"} and cfg.rollout.enable_think is False


@pytest.mark.parametrize(("override", "field"), [
    ("optim.lr=fast", "optim.lr"),
    ("optim.lrr=1", "optim.lrr"),
    ("nosuch.x=1", "nosuch"),
    ("algorithm.adv_estimator=remax", "algorithm.adv_estimator"),
    ("algorithm.loss_agg_mode=mean", "algorithm.loss_agg_mode"),
    ("rollout.group_size=1", "rollout.group_size"),
    ("rollout.env_groups=0", "rollout.env_groups"),
    ("algorithm.kl_estimator=low-var-kl", "algorithm.kl_estimator"),
    ("rollout.temperature=0", "rollout.temperature"),
    ("rollout.max_turns=2.5", "rollout.max_turns"),
    ("env.id=ragen/Sokobn-v0", "env.id"),
    ("env.config.risky_prob=2", "env.config.risky_prob"),
    ("env.id=ragen/Sokoban-v0", "env.config.risky_prob"),  # the Bandit preset's env setting does not fit Sokoban
])
def test_bad_overrides_name_the_field(override: str, field: str) -> None:
    with pytest.raises(ConfigError) as exc:
        load_config("quickstart", [override])
    assert exc.value.field == field


def test_switching_env_with_an_empty_env_config_is_accepted() -> None:
    cfg = load_config("quickstart", ["env.id=ragen/Sokoban-v0", "env.config={}"])
    assert cfg.env.id == "ragen/Sokoban-v0" and cfg.env.config == {}


def test_unknown_preset_or_file() -> None:
    with pytest.raises(ConfigError, match="neither a preset"):
        load_config("no-such-preset")


def test_json_config_file_roundtrip(tmp_path: Path) -> None:
    cfg = load_config("sokoban", ["optim.lr=3e-6"])
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(cfg.to_dict()))
    again = load_config(str(p))
    assert again == cfg
    bad = cfg.to_dict()
    bad["optim"]["beta3"] = 1
    p.write_text(json.dumps(bad))
    with pytest.raises(ConfigError, match="optim.beta3"):
        load_config(str(p))


def test_defaults_follow_ragen_base_yaml() -> None:
    c = StarPOConfig()
    # reference section 3.7: clip 0.2/0.28, entropy 0.001, gamma=lam=1, turn gamma 0.95, lr 1e-6 / 1e-5
    assert (c.algorithm.clip_low, c.algorithm.clip_high, c.algorithm.entropy_coef) == (0.2, 0.28, 0.001)
    assert (c.algorithm.gamma, c.algorithm.lam, c.algorithm.turn_gamma) == (1.0, 1.0, 0.95)
    assert (c.optim.lr, c.optim.critic_lr, c.algorithm.dual_clip) == (1e-6, 1e-5, 3.0)
    assert apply_overrides(c, []) == c
