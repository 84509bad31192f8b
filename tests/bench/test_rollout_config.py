"""One builder of a run's rollout config: ``ragen_bench.rollout.rollout_config``
takes the bench's override dict and a training config's ``rollout`` section alike (the import
graph is checked in tests/test_import_graph.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ragen_envs
from ragen_bench.rollout import PROTOCOL_FIELDS, RolloutConfig, protocol_overrides, rollout_config
from ragen_bench.types import SamplingParams
from ragen_train.config import load_config, rollout_config_for

ROOT = Path(__file__).resolve().parents[2]


def test_a_training_section_and_its_override_dict_give_the_same_config() -> None:
    cfg = load_config("tiny-sokoban-grpo", ["rollout.context_window=3", "rollout.top_p=0.9"])
    from_section = rollout_config(cfg.env.id, cfg.rollout, temperature=0.3)
    from_dict = rollout_config(cfg.env.id, protocol_overrides(cfg.rollout, 0.3))
    assert from_section == from_dict
    assert from_section.sampling.temperature == 0.3 and from_section.sampling.top_p == 0.9
    assert from_section.context_window == 3
    # None in the section = the env's agent_defaults
    defaults = ragen_envs.get_entry(cfg.env.id).agent_defaults
    assert cfg.rollout.max_turns is None or cfg.rollout.max_turns == from_section.max_turns
    if cfg.rollout.max_turns is None:
        assert from_section.max_turns == defaults["max_turns"]
    assert set(protocol_overrides(cfg.rollout)) == {*PROTOCOL_FIELDS, "sampling"}


def test_temperature_overrides_a_sampling_object_too() -> None:
    sampling = SamplingParams(temperature=1.0, top_p=0.5, max_new_tokens=7)
    r = rollout_config("ragen/Bandit-v0", {"sampling": sampling}, temperature=0.0)
    assert (r.sampling.temperature, r.sampling.top_p, r.sampling.max_new_tokens) == (0.0, 0.5, 7)
    assert rollout_config("ragen/Bandit-v0") == rollout_config("ragen/Bandit-v0", {})


def test_the_old_train_name_still_works_and_warns() -> None:
    """``rollout_config_for`` (documented until this release) forwards to the one builder."""
    cfg = load_config("tiny-sokoban-grpo")
    with pytest.warns(DeprecationWarning, match=r"ragen_bench\.rollout\.rollout_config"):
        old = rollout_config_for(cfg, 0.3, "ragen/Bandit-v0")
    assert old == rollout_config("ragen/Bandit-v0", cfg.rollout, temperature=0.3)
    assert old.sampling.temperature == 0.3


def test_the_train_side_builds_no_rollout_config_of_its_own() -> None:
    """Every ``RolloutConfig(...)`` is built in ``ragen_bench/rollout.py``."""
    builders = []
    for path in sorted(ROOT.glob("ragen_*/**/*.py")):
        if path.relative_to(ROOT).as_posix() == "ragen_bench/rollout.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "RolloutConfig":
                builders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert builders == []


def test_a_saved_config_comes_back_as_saved() -> None:
    """``RolloutConfig.from_dict`` inverts ``as_dict`` (run.json, the verl loop's settings),
    and does not overlay the env's defaults: a saved ``None`` stays ``None``."""
    r = rollout_config(
        "ragen/Sokoban-v0",
        {"format_reminder": True, "max_context_tokens": None, "sampling": {"stop": ["</a>"]}},
    )
    back = RolloutConfig.from_dict(r.as_dict())
    assert back == r and back.sampling.stop == ("</a>",) and back.format_reminder
    with pytest.raises(TypeError, match="max_turn"):
        RolloutConfig.from_dict({"max_turn": 3})
