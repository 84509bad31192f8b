"""The data layer: loaders, bundled splits with provenance, disjoint splits, seed semantics."""

from __future__ import annotations

import gzip
import importlib
import json
import re
import sys
import types
from pathlib import Path

import jsonschema
import pytest

import ragen_envs
from ragen_envs.config import schema_validator
from ragen_envs.data.bundled import (
    PERMISSIVE_LICENSES,
    bundled_dirs,
    file_sha256,
    list_bundled,
)
from ragen_envs.data.loaders import (
    ENVS_EXTRAS,
    SOURCE_SPLIT_KEY,
    DataSourceError,
    MissingExtraError,
    load_bundled,
    load_hub,
    load_source,
    read_records,
)
from ragen_envs.data.splits import (
    LeakageError,
    assert_disjoint,
    canonical_key,
    normalize_text,
    partition,
)
from ragen_envs.dataset_env import DatasetEnv
from ragen_envs.seeding import instance_split

from .conftest import REPO, load_script


def _is_dataset_env(entry: ragen_envs.EnvEntry) -> bool:
    module, _, cls = entry.entry_point.partition(":")
    return issubclass(getattr(importlib.import_module(module), cls), DatasetEnv)


#: Every registered id backed by the data layer (MetaMathQA, DeepCoder, and any later one).
DATA_ENV_IDS = [e.id for e in ragen_envs.list_envs() if not e.procedural and _is_dataset_env(e)]


# ------------------------------------------------------------------ loaders
ROWS = [{"q": "one", "a": 1}, {"q": "two", "a": 2}]


def _write(path: Path, text: str | bytes) -> Path:
    if path.name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode() if isinstance(text, str) else text))
    else:
        path.write_text(text) if isinstance(text, str) else path.write_bytes(text)
    return path


@pytest.mark.parametrize("name", ["d.jsonl", "d.ndjson", "d.jsonl.gz"])
def test_read_jsonl(tmp_path: Path, name: str) -> None:
    p = _write(tmp_path / name, "\n".join(json.dumps(r) for r in ROWS) + "\n\n")
    assert read_records(p) == ROWS


@pytest.mark.parametrize(
    ("name", "payload"),
    [("d.json", ROWS), ("d.json.gz", ROWS), ("w.json", {"data": ROWS}), ("r.json", {"rows": ROWS})],
)
def test_read_json(tmp_path: Path, name: str, payload: object) -> None:
    assert read_records(_write(tmp_path / name, json.dumps(payload))) == ROWS


def test_malformed_jsonl_names_file_and_line(tmp_path: Path) -> None:
    p = _write(tmp_path / "bad.jsonl", '{"q": 1}\n{oops\n')
    with pytest.raises(DataSourceError, match=r"bad.jsonl:2: invalid JSON"):
        read_records(p)
    with pytest.raises(DataSourceError, match="expected a JSON object"):
        read_records(_write(tmp_path / "list.jsonl", "[1, 2]\n"))


def test_unknown_and_missing_files_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(DataSourceError, match="unknown data format"):
        read_records(_write(tmp_path / "d.csv", "a,b\n"))
    with pytest.raises(DataSourceError, match="no such data file"):
        read_records(tmp_path / "missing.jsonl")
    with pytest.raises(DataSourceError, match="list of JSON objects"):
        read_records(_write(tmp_path / "n.json", "42"))


def test_parquet_roundtrip_or_clear_missing_extra(tmp_path: Path) -> None:
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError:
        p = _write(tmp_path / "d.parquet", b"PAR1")
        with pytest.raises(
            MissingExtraError, match=re.escape("pip install 'ragen[datasets]'")
        ) as exc:
            read_records(p)
        assert exc.value.package == "pyarrow" and exc.value.extra == "datasets"
        return
    pq.write_table(pa.Table.from_pylist(ROWS), tmp_path / "d.parquet")
    assert read_records(tmp_path / "d.parquet") == ROWS


def test_parquet_without_pyarrow_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(MissingExtraError, match="pyarrow"):
        read_records(_write(tmp_path / "d.parquet", b"PAR1"))


def test_hub_without_datasets_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "datasets", None)
    with pytest.raises(
        MissingExtraError,
        match=re.escape("pip install 'ragen[datasets]' (or just pip install datasets)"),
    ) as exc:
        load_hub("openai/gsm8k", config="main")
    assert "ragen-envs" not in str(exc.value), "ragen-envs has no datasets extra"


def test_missing_extra_messages_name_only_extras_that_exist() -> None:
    """ENVS_EXTRAS is exactly the extras of packaging/ragen-envs/pyproject.toml, each also
    defined by the full project; the message names both distributions for those."""
    import tomllib

    root = REPO
    envs = tomllib.loads((root / "packaging/ragen-envs/pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    full = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert ENVS_EXTRAS == set(envs) and ENVS_EXTRAS <= set(full)
    msg = str(MissingExtraError("bm25s", "webshop", "the WebShop search"))
    assert msg == (
        "the WebShop search needs the optional package 'bm25s'; install it with pip install "
        "'ragen-envs[webshop]' (or 'ragen[webshop]' for the full project, or just pip install bm25s)"
    )


def test_unreachable_hub_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    # The hub is unreachable from the build machine, so only the error path is tested:
    # a stand-in `datasets` whose load_dataset fails as it does offline.
    fake = types.ModuleType("datasets")

    def load_dataset(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'openai/gsm8k' on the Hub (LocalEntryNotFoundError)")

    fake.load_dataset = load_dataset  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    with pytest.raises(DataSourceError, match="local path") as exc:
        load_source("hub:openai/gsm8k:main")
    assert "openai/gsm8k" in str(exc.value) and "ConnectionError" in str(exc.value)


def test_hub_records_carry_the_source_split(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.ModuleType("datasets")
    fake.load_dataset = lambda name, config, split=None, **kw: {
        "train": [{"x": 1}],
        "test": [{"x": 2}],
    }  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "datasets", fake)
    assert load_hub("o/n") == [
        {"x": 1, SOURCE_SPLIT_KEY: "train"},
        {"x": 2, SOURCE_SPLIT_KEY: "test"},
    ]


def test_directory_source_uses_file_names_as_source_splits(tmp_path: Path) -> None:
    _write(tmp_path / "train.jsonl", json.dumps({"q": "a"}) + "\n")
    _write(tmp_path / "test-00000-of-00001.json", json.dumps([{"q": "b"}]))
    _write(tmp_path / "extra.jsonl", json.dumps({"q": "c"}) + "\n")
    recs = load_source(str(tmp_path))
    assert {(r["q"], r.get(SOURCE_SPLIT_KEY)) for r in recs} == {
        ("a", "train"),
        ("b", "test"),
        ("c", None),
    }
    assert load_source(f"file:{tmp_path}") == recs


def test_bad_source_specs() -> None:
    with pytest.raises(DataSourceError):
        load_source("")
    with pytest.raises(KeyError, match="bundled"):
        load_source("bundled:no-such-set")


# ------------------------------------------------------------------ bundled
def test_bundled_registry_lists_our_sets() -> None:
    assert {
        "math-templates-metamathqa",
        "math-templates-gsm8k",
        "humaneval",
        "code-stdio-ours",
    } <= set(list_bundled())


@pytest.mark.parametrize("name", sorted(list_bundled()))
def test_every_bundled_file_has_valid_provenance(name: str) -> None:
    info = list_bundled()[name]
    sidecar = json.loads(info.sidecar.read_text())
    schema_validator("data/provenance").validate(sidecar)
    assert info.license in PERMISSIVE_LICENSES
    assert info.path.is_file() and file_sha256(info.path) == info.sha256
    assert len(load_bundled(name)) == info.records
    if info.license_file:
        text = (info.folder / info.license_file).read_text()
        assert "Permission is hereby granted" in text  # the MIT grant is shipped with the data


def test_humaneval_copy_is_the_mit_licensed_openai_file() -> None:
    info = list_bundled()["humaneval"]
    assert info.license == "MIT" and "OpenAI" in info.copyright and info.records == 164
    text = (info.folder / "humaneval.LICENSE.txt").read_text()
    assert "MIT License" in text and "OpenAI" in text


def test_provenance_schema_rejects_a_non_permissive_licence() -> None:
    sidecar = json.loads(list_bundled()["humaneval"].sidecar.read_text())
    sidecar["license"] = "CC-BY-NC-4.0"
    with pytest.raises(jsonschema.ValidationError):
        schema_validator("data/provenance").validate(sidecar)


def test_bundled_files_are_reproducible() -> None:
    assert load_script("build_bundled").build(check=True) == []


def test_every_package_data_file_is_accounted_for() -> None:
    names = {p for folder in bundled_dirs() for p in folder.iterdir()}
    covered = set()
    for info in list_bundled().values():
        covered |= {info.path, info.sidecar} | (
            {info.folder / info.license_file} if info.license_file else set()
        )
    assert names == covered


# ------------------------------------------------------------------- splits
def test_normalisation_merges_whitespace_and_case_variants() -> None:
    assert normalize_text("  What is  2+2?\n") == normalize_text("WHAT IS 2+2?") == "what is 2+2?"
    assert normalize_text("2+2") != normalize_text("2+3")
    assert canonical_key("A", "b") != canonical_key("A b")


def test_partition_is_disjoint_and_near_duplicates_share_a_split() -> None:
    items = [f"Question number {i}?" for i in range(500)]
    variants = [s.upper() for s in items] + [s.replace(" ", "   ") for s in items]
    table = partition(items + variants, canonical_key)
    assert_disjoint(table.keys)
    assert sum(table.sizes.values()) == 500 and table.duplicates_dropped == 1000
    for split in ("train", "validation", "test"):
        assert table.sizes[split] > 0
        for key in table.keys[split]:
            assert instance_split(key) == split


def test_partition_is_stable_and_independent_of_file_order() -> None:
    items = [f"item {i}" for i in range(300)]
    a = partition(items, canonical_key)
    b = partition(list(reversed(items)) + ["a new item"], canonical_key)
    for split in ("train", "validation", "test"):
        assert [x for x in b[split] if x != "a new item"] == list(a[split])


def test_source_mode_keeps_source_splits_and_removes_leaks() -> None:
    rows = (
        [{"q": f"train {i}", SOURCE_SPLIT_KEY: "train"} for i in range(200)]
        + [{"q": f"test {i}", SOURCE_SPLIT_KEY: "test"} for i in range(20)]
        + [
            {"q": "TEST 3", SOURCE_SPLIT_KEY: "train"},  # a test question copied into train
            {"q": "  train 5 ", SOURCE_SPLIT_KEY: "test"},
        ]
    )  # a train question copied into test
    table = partition(rows, lambda r: canonical_key(r["q"]), mode="source")
    assert_disjoint(table.keys)
    test_keys = set(table.keys["test"])
    assert canonical_key("test 3") in test_keys and canonical_key("train 5") in test_keys
    assert canonical_key("train 5") not in set(table.keys["train"]) | set(table.keys["validation"])
    assert table.leaks_dropped == 2
    # No validation split in the source: train items whose hash says "validation" form it.
    assert table.sizes["validation"] > 0
    assert all(instance_split(k) == "validation" for k in table.keys["validation"])


def test_assert_disjoint_detects_leaks() -> None:
    with pytest.raises(LeakageError, match="both train and test"):
        assert_disjoint({"train": ["a", "b"], "test": ["b"]})


def test_data_backed_ids_are_found() -> None:
    assert {"ragen/MetaMathQA-v0", "ragen/DeepCoder-v0"} <= set(DATA_ENV_IDS)


@pytest.mark.parametrize("env_id", DATA_ENV_IDS)
def test_no_validation_or_test_item_appears_in_training(env_id: str) -> None:
    env = ragen_envs.make(env_id).unwrapped
    table = env.split_table()
    # Keys are already normalised; re-normalise the raw text too (whitespace/case variants).
    train = set(table.keys["train"])
    for split in ("validation", "test"):
        assert table.sizes[split] > 0, f"{env_id}: empty {split} split"
        for item, key in zip(table[split], table.keys[split]):
            assert key not in train
            assert canonical_key(env._item_key(item)) not in train
    raw_train = {normalize_text(env._item_key(it)) for it in table["train"]}
    for split in ("validation", "test"):
        assert not raw_train & {normalize_text(env._item_key(it)) for it in table[split]}


# ----------------------------------------------------------- seed semantics
@pytest.mark.parametrize("env_id", ["ragen/MetaMathQA-v0", "ragen/MetaMathQA-GSM8K-v0"])
def test_seed_i_selects_item_i_mod_n(env_id: str) -> None:
    env = ragen_envs.make(env_id, split="test").unwrapped
    items = env.split_items()
    n = len(items)
    for seed in (0, 1, 7, n - 1, n, n + 5, 10 * n + 3):
        obs, info = env.reset(seed=seed)
        assert info["item_index"] == seed % n and env.item is items[seed % n]
    _, info = env.reset(options={"index": n + 2})
    assert info["item_index"] == 2


def test_unseeded_reset_continues_the_seeded_stream() -> None:
    a = ragen_envs.make("ragen/MetaMathQA-v0").unwrapped
    b = ragen_envs.make("ragen/MetaMathQA-v0").unwrapped
    a.reset(seed=11)
    b.reset(seed=11)
    assert [a.reset()[1]["item_id"] for _ in range(5)] == [
        b.reset()[1]["item_id"] for _ in range(5)
    ]


def test_empty_split_is_a_clear_error(tmp_path: Path) -> None:
    _write(tmp_path / "one.jsonl", json.dumps({"question": "What is 1+1?", "answer": "2"}) + "\n")
    split = instance_split(canonical_key("What is 1+1?"))
    other = next(s for s in ("train", "validation", "test") if s != split)
    env = ragen_envs.make(
        "ragen/MetaMathQA-v0", data_source=str(tmp_path / "one.jsonl"), split=other
    ).unwrapped
    with pytest.raises(DataSourceError, match="is empty"):
        env.reset(seed=0)
