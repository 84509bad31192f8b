"""Old results stay readable: every committed run directory, training
output folder, board and example validates with today's schemas, and schema changes follow
the rules of :mod:`ragen_bench.schema_versions`."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from ragen_bench import schema_versions
from ragen_bench.schema_versions import (
    ADDED_FIELDS,
    CURRENT,
    MIGRATIONS,
    RENAMED_FIELDS,
    added_fields,
    schema_default,
    upgrade,
)
from ragen_bench.validate import InvalidFileError, dir_files, validate_file

ROOT = Path(__file__).resolve().parents[1]
#: Committed example outputs that are free-form summaries of examples/real_model_run.py and
#: examples/learning_demo.py, not files any ragen command reads back (no schema).
FREE_FORM = {
    "examples/learning_demo_results.json",
    "examples/real_model/results.json",
    "examples/real_model/cpu-bandit-lora/result.json",
    "examples/real_model/cpu-frozenlake-lora/result.json",
    "examples/real_model/cpu-bandit-lora/test_outcomes.jsonl",
    "examples/real_model/cpu-frozenlake-lora/test_outcomes.jsonl",
    "examples/real_model/cpu-bandit-lora-drgrpo/result.json",
    "examples/real_model/cpu-bandit-lora-drgrpo/test_outcomes.jsonl",
    "examples/real_model/cpu-frozenlake-lora-entropy/result.json",
    "examples/real_model/cpu-frozenlake-lora-entropy/test_outcomes.jsonl",
}
#: A training config written before a rename and two added fields (tests/data/old_results).
OLD_CONFIG = ROOT / "tests/data/old_results/train_config_224528f.json"


def _committed() -> list[str]:
    try:
        out = subprocess.run(
            ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the committed files cannot be listed")
    return [line for line in out.splitlines() if not line.startswith("tests/data/")]


def _result_dirs(files: list[str]) -> list[Path]:
    """Run directories (run.json) and training output folders (a training config.json)."""
    dirs = set()
    for f in files:
        p = ROOT / f
        if p.name == "run.json":
            dirs.add(p.parent)
        elif p.name == "config.json":
            data = json.loads(p.read_text())
            if isinstance(data, dict) and {"env", "rollout", "trainer"} <= set(data):
                dirs.add(p.parent)
    return sorted(dirs)


def test_every_committed_run_board_and_example_validates() -> None:
    files = _committed()
    dirs = _result_dirs(files)
    assert any("examples/real_model" in str(d) for d in dirs)  # the two failing before
    checked = []
    for d in dirs:
        for f, kind in dir_files(d):
            assert f.exists(), f"{f} is missing"
            validate_file(f, kind)
            checked.append(f)
    boards = [ROOT / f for f in files if f.startswith("leaderboards/") and f.endswith(".json")]
    assert len(boards) >= 3
    for b in boards:
        assert validate_file(b)[0] == "leaderboard"
        checked.append(b)
    examples = [f for f in files if f.startswith("examples/") and f.endswith((".json", ".jsonl"))]
    for f in examples:
        if f in FREE_FORM or ROOT / f in checked:
            continue
        validate_file(ROOT / f)  # any other example file must follow a schema
    assert len(checked) >= 7


def test_added_field_defaults_are_the_configs_defaults() -> None:
    from ragen_train.config import StarPOConfig

    defaults = StarPOConfig().to_dict()
    assert len(added_fields("train_config")) == len(ADDED_FIELDS["train_config"]) == 11
    for path, default in added_fields("train_config"):
        node = defaults
        for key in path.split("."):
            node = node[key]
        assert node == default, path


def test_an_added_field_without_a_schema_default_is_named() -> None:
    assert schema_default("train_config", "trainer.dist_timeout_s") == 600.0
    assert schema_default("train_config", "env.train") == []
    with pytest.raises(KeyError, match="no property 'trainer.no_such_field'"):
        schema_default("train_config", "trainer.no_such_field")
    with pytest.raises(KeyError, match="gives 'trainer' no default"):
        schema_default("train_config", "trainer")


def test_renamed_fields_are_the_configs_renames() -> None:
    from ragen_train.config import RENAMED_FIELDS as CONFIG_RENAMES

    assert dict(RENAMED_FIELDS["train_config"]) == CONFIG_RENAMES


def test_an_old_training_config_has_its_renamed_field_moved() -> None:
    old = json.loads(OLD_CONFIG.read_text())
    engine = old["rollout"]["engine"]
    upgrade(old, "train_config")
    assert "engine" not in old["rollout"] and old["rollout"]["sampler"] == engine


def test_an_old_training_config_gets_the_defaults_of_added_fields() -> None:
    old = json.loads(OLD_CONFIG.read_text())
    assert "degenerate_stop_steps" not in old["trainer"] and "lr_schedule" not in old["optim"]
    upgrade(old, "train_config")
    assert old["trainer"]["degenerate_stop_steps"] == 10
    assert old["optim"]["lr_schedule"] == "constant"


def test_every_version_bump_has_a_migration() -> None:
    for kind, version in CURRENT.items():
        for old in range(1, version or 1):
            assert (kind, old) in MIGRATIONS, f"{kind} schema_version {old} has no migration"


def test_migrations_chain_and_unknown_versions_are_refused(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # a made-up history: leaderboard v1 -> v2 renamed "entries" to "rows", v2 -> v3 back
    monkeypatch.setitem(schema_versions.CURRENT, "leaderboard", 3)
    monkeypatch.setitem(
        schema_versions.MIGRATIONS,
        ("leaderboard", 1),
        lambda b: {**{k: v for k, v in b.items() if k != "entries"}, "rows": b["entries"]},
    )
    monkeypatch.setitem(
        schema_versions.MIGRATIONS,
        ("leaderboard", 2),
        lambda b: {**{k: v for k, v in b.items() if k != "rows"}, "entries": b["rows"]},
    )
    board = json.loads((ROOT / "leaderboards/procedural.json").read_text())
    entries = board["entries"]
    upgrade(board, "leaderboard")
    assert board["schema_version"] == 3 and board["entries"] == entries
    with pytest.raises(schema_versions.SchemaVersionError, match="schema_version 4"):
        upgrade({"schema_version": 4}, "leaderboard")
    monkeypatch.delitem(schema_versions.MIGRATIONS, ("leaderboard", 2))
    with pytest.raises(schema_versions.SchemaVersionError, match="has no migration to 3"):
        upgrade({"schema_version": 2, "rows": []}, "leaderboard")
    # through the file reader: one line naming the file
    f = tmp_path / "b.json"
    f.write_text(json.dumps({**board, "schema_version": 7}))
    with pytest.raises(InvalidFileError, match=r"b\.json: schema_version 7 is not supported"):
        validate_file(f)
