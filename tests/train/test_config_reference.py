"""docs/config-reference.md is generated from the field declarations and kept in sync, and
every field has a real one-line help (scripts/config_reference.py, like scripts/env_table.py)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_train.cli import app
from ragen_train.config import FIELD_SPECS, FIELDS, TrainConfigError, explain_fields

ROOT = Path(__file__).resolve().parents[2]


def _script():
    spec = importlib.util.spec_from_file_location(
        "config_reference", ROOT / "scripts" / "config_reference.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_reference_page_matches_the_declarations(tmp_path: Path, capsys) -> None:
    script = _script()
    assert script.main(["--check"]) == 0, "run: python scripts/config_reference.py"
    stale = tmp_path / "config-reference.md"
    stale.write_text(script.page().replace("AdamW", "Adam"), encoding="utf-8")
    assert script.main(["--check"], stale) == 1  # the check notices a stale page
    fresh_schema = tmp_path / "schema.json"
    fresh_schema.write_text(script.schema_text().replace("AdamW", "Adam"), encoding="utf-8")
    assert script.main(["--check"], script.PAGE, fresh_schema) == 1  # and a stale schema
    text = script.page()
    for spec in FIELD_SPECS:
        assert f"`{spec.path.rsplit('.', 1)[-1]}`" in text
    assert "| `optim.lr` | *mapped*: learning_rate | *mapped*: actor.optim.lr |" in text
    assert "config-reference.md" in (ROOT / "mkdocs.yml").read_text(encoding="utf-8")


def test_every_field_has_a_one_line_help() -> None:
    assert len(FIELD_SPECS) >= 115
    for spec in FIELD_SPECS:
        h = spec.help
        assert h and "\n" not in h and 15 <= len(h) <= 160, (spec.path, h)
        assert h == h.strip() and h.endswith("."), (spec.path, h)
        assert h.lower().rstrip(".") != spec.path.rsplit(".", 1)[-1].replace("_", " "), spec.path
    assert FIELDS["optim.lr"].help.startswith("Policy learning rate")


def test_explain_prints_help_type_default_and_range() -> None:
    res = CliRunner().invoke(app, ["show-config", "--explain", "algorithm.clip_high"])
    assert res.exit_code == 0, res.output
    lines = [x.strip() for x in res.stdout.splitlines()]
    assert lines[0] == "algorithm.clip_high"
    assert "clip-higher" in lines[1]
    assert "type:    float" in lines and "default: 0.28" in lines
    assert "allowed: >= 0" in lines and "value:   0.28" in lines
    choices = explain_fields("rollout.context_mode")
    assert "allowed: one of: full, last_k, single_turn" in choices
    section = explain_fields("rollout.vllm")
    assert section.count("\n\n") == 7 and section.startswith("rollout.vllm.dtype")
    assert len(explain_fields("all").split("\n\n")) == len(FIELD_SPECS)


def test_explain_unknown_field_is_one_line_with_a_suggestion() -> None:
    res = CliRunner().invoke(app, ["show-config", "--explain", "optim.lrr"])
    assert res.exit_code == 2
    lines = [x for x in res.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and "did you mean optim.lr" in lines[0]
    with pytest.raises(TrainConfigError, match="did you mean optim.kl_coef|algorithm.kl_coef"):
        explain_fields("kl_coef")


def test_schema_carries_each_fields_help_and_default() -> None:
    schema = json.loads((ROOT / "schemas" / "train_config.schema.json").read_text())
    lr = schema["properties"]["optim"]["properties"]["lr"]
    assert lr["description"] == FIELDS["optim.lr"].help and lr["default"] == 1e-6
    assert lr["exclusiveMinimum"] == 0
    weight = schema["properties"]["env"]["properties"]["train"]["items"]["properties"]["weight"]
    assert weight["exclusiveMinimum"] == 0 and weight["description"]
    loggers = schema["properties"]["trainer"]["properties"]["loggers"]
    assert loggers["items"]["enum"] == ["jsonl", "console", "tensorboard", "wandb"]
