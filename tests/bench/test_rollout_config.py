"""One builder of a run's rollout config (issue 30 item 2): ``ragen_bench.rollout.rollout_config``
takes the bench's override dict and a training config's ``rollout`` section alike, and the
modules around it import in one direction."""

from __future__ import annotations

import ast
import warnings
from pathlib import Path

import pytest

import ragen_envs
from ragen_bench.rollout import PROTOCOL_FIELDS, protocol_overrides, rollout_config
from ragen_bench.types import SamplingParams
from ragen_train.config import load_config, rollout_config_for

ROOT = Path(__file__).resolve().parents[2]


def test_a_training_section_and_its_override_dict_give_the_same_config() -> None:
    cfg = load_config("tiny-sokoban-grpo", ["rollout.context_window=3", "rollout.top_p=0.9"])
    from_section = rollout_config(cfg.env.id, cfg.rollout, temperature=0.3)
    from_dict = rollout_config(cfg.env.id, protocol_overrides(cfg.rollout, 0.3))
    assert from_section == from_dict == rollout_config_for(cfg, 0.3)
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


def test_the_old_bench_name_still_works_and_warns() -> None:
    from ragen_bench.runner import rollout_config_from

    with pytest.warns(DeprecationWarning, match="rollout_config"):
        old = rollout_config_from("ragen/Bandit-v0", {"max_turns": 2})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert old == rollout_config("ragen/Bandit-v0", {"max_turns": 2})


def _imports(module: Path) -> set[str]:
    """Every module ``module`` imports, at the top or inside a function (relative imports
    resolved against its package)."""
    package = module.parent.relative_to(ROOT).as_posix().replace("/", ".")
    out: set[str] = set()
    for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package if node.level == 1 else "" if node.level == 0 else None
            name = node.module or ""
            if base is None:
                continue
            full = f"{base}.{name}".strip(".") if node.level else name
            out.add(full)
            out.update(f"{full}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize(
    ("module", "must_not_import"),
    [
        ("ragen_bench/protocol.py", "ragen_bench.runner"),  # runner imports protocol
        ("ragen_train/multienv.py", "ragen_train.config"),  # config imports multienv
        ("ragen_train/filtering.py", "ragen_train.config"),  # config imports filtering
    ],
)
def test_no_import_cycle(module: str, must_not_import: str) -> None:
    assert must_not_import not in _imports(ROOT / module)
    # the other direction exists, so importing back would close a cycle
    back = {
        "ragen_bench.runner": "ragen_bench/runner.py",
        "ragen_train.config": "ragen_train/config.py",
    }
    importer = _imports(ROOT / back[must_not_import])
    assert module.removesuffix(".py").replace("/", ".") in importer
