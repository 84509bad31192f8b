"""Lean data: the bundled miniF2F with provenance, the splits, and the JSONL loader's errors."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import jsonschema
import pytest

import ragen_envs
from ragen_envs.data.loaders import DataSourceError
from ragen_envs.envs.lean.theorems import (
    BUILTIN_SOURCES,
    MINIF2F_HEADER,
    load_theorems,
    source_split,
)

DATA_DIR = BUILTIN_SOURCES["minif2f"].parent
SCHEMA = (
    Path(ragen_envs.__file__).resolve().parent.parent
    / "schemas"
    / "data"
    / "provenance.schema.json"
)


def test_bundled_minif2f_matches_its_provenance() -> None:
    meta = json.loads((DATA_DIR / "minif2f.provenance.json").read_text(encoding="utf-8"))
    if SCHEMA.is_file():
        jsonschema.validate(meta, json.loads(SCHEMA.read_text(encoding="utf-8")))
    data = DATA_DIR / meta["file"]
    assert hashlib.sha256(data.read_bytes()).hexdigest() == meta["sha256"]
    assert meta["records"] == 488 == len(load_theorems("builtin:minif2f"))
    assert "2c4ba9119eef74d0d611f494261b2c5bae98c69a" in meta["source"]
    for licence in (meta["license_file"], "minif2f.LICENSE-DeepSeek-Prover-V1.5-code.txt"):
        assert (DATA_DIR / licence).read_text(encoding="utf-8").strip()


def test_splits_valid_half_to_train_and_validation_test_to_test() -> None:
    theorems = load_theorems("builtin:minif2f")
    by_source = {t.name: t.split for t in theorems}
    env = ragen_envs.make("ragen/Lean-v0").unwrapped
    table = env.split_table()
    names = {s: {t.name for t in table[s]} for s in ("train", "validation", "test")}
    assert {s: len(v) for s, v in names.items()} == {"train": 194, "validation": 50, "test": 244}
    assert (
        not (names["train"] & names["validation"])
        and not (names["train"] | names["validation"]) & names["test"]
    )
    assert {by_source[n] for n in names["train"] | names["validation"]} == {"valid"}
    assert {by_source[n] for n in names["test"]} == {"test"}
    # The rule is a function of the name alone: the same in any order, any process.
    assert all(
        source_split(t)
        == (
            "test"
            if t.name in names["test"]
            else "validation"
            if t.name in names["validation"]
            else "train"
        )
        for t in theorems
    )


def _write(tmp_path: Path, rows: list[object | str]) -> Path:
    p = tmp_path / "thms.jsonl"
    p.write_text(
        "\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n", encoding="utf-8"
    )
    return p


GOOD = {"name": "t1", "formal_statement": "theorem t1 : 1 = 1 := by"}


def test_loader_takes_minimal_records(tmp_path: Path) -> None:
    p = _write(
        tmp_path,
        [
            GOOD,
            "",
            {
                "name": "t2",
                "formal_statement": "theorem t2 : 2 = 2 :=",
                "header": "",
                "informal_prefix": "/-- Two is two. -/",
            },
        ],
    )
    a, b = load_theorems(str(p))
    assert (a.statement, a.header, a.informal) == ("theorem t1 : 1 = 1 := by\n", MINIF2F_HEADER, "")
    assert (b.statement, b.header, b.informal) == ("theorem t2 : 2 = 2 := by\n", "", "Two is two.")
    env = ragen_envs.make("ragen/Lean-v0", data_source=str(p), split_mode="hash").unwrapped
    assert sum(env.split_table().sizes.values()) == 2


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([GOOD, {"name": "t2"}], r":2: missing field 'formal_statement'"),
        (
            [GOOD, "", {"name": 3, "formal_statement": "x := by"}],
            r":3: field 'name' must be a string, got int",
        ),
        (
            [{"name": "t", "formal_statement": "theorem t : True := trivial"}],
            r":1: field 'formal_statement' of 't' must end in ':= by'",
        ),
        ([{"name": " ", "formal_statement": "x := by"}], r":1: field 'name' is empty"),
        ([GOOD, GOOD], r":2: theorem name 't1' repeats record 1"),
        ([GOOD, "{not json"], r":2: invalid JSON"),
        ([GOOD, "[1, 2]"], r":2: expected a JSON object, got list"),
    ],
)
def test_loader_bad_lines_are_one_line_errors(tmp_path: Path, rows: list, message: str) -> None:
    p = _write(tmp_path, rows)
    with pytest.raises(DataSourceError, match=message) as exc:
        load_theorems(str(p))
    assert "\n" not in str(exc.value) and str(p) in str(exc.value)


def test_bad_data_source_fails_at_make(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="no built-in Lean data set 'nope'"):
        ragen_envs.make("ragen/Lean-v0", data_source="builtin:nope").reset(seed=0)
    with pytest.raises(DataSourceError, match="no such data file"):
        ragen_envs.make("ragen/Lean-v0", data_source=str(tmp_path / "missing.jsonl")).reset(seed=0)


def test_reset_by_theorem_name() -> None:
    env = ragen_envs.make("ragen/Lean-v0", split="test").unwrapped
    _, info = env.reset(options={"theorem": "mathd_algebra_478"})
    assert info["item_id"] == "mathd_algebra_478"
    with pytest.raises(KeyError, match="no theorem 'amc12a_2019_p21' in split 'test'"):
        env.reset(options={"theorem": "amc12a_2019_p21"})  # a valid-half theorem
