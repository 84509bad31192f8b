"""Every training-config field is handled — mapped, done by our code, approximated, unused
with a reason, or refused — by each external back-end, and the refusals are real.

The tables are ``TRL_FIELDS`` (ragen_train/backends/trl_backend.py) and ``VERL_FIELDS``
(verl_backend.py); a field added to ``ragen_train/config.py`` fails here until both say what
they do with it.  The settings each back-end produces are generated from the same tables
(:mod:`ragen_train.backends.field_map`): every key a table declares is produced, every produced
key is declared (or fixed), and the result equals the hand-written mapping it replaced.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from ragen_train.backends.common import HANDLING_STATUSES, FieldHandling, field_coverage
from ragen_train.backends.field_map import declared_keys
from ragen_train.backends.trl_backend import TRL_FIELDS, TRL_FIXED, trl_settings
from ragen_train.backends.verl_backend import (
    VERL_ESTIMATOR_KEYS,
    VERL_FIELDS,
    VERL_FIXED,
    verl_settings,
)
from ragen_train.config import FIELD_SPECS, TrainConfigError, load_config

TOP_FIELDS = {s.path for s in FIELD_SPECS if not s.in_list}


def _trl(cfg):
    return trl_settings(cfg)


def _verl(cfg):
    return verl_settings(
        cfg, train_files="t.parquet", val_files="v.parquet", agent_loop_config="a.yaml"
    )


BACKENDS = {"trl": (TRL_FIELDS, _trl), "verl": (VERL_FIELDS, _verl)}
BASE = ["trainer.out_dir=/tmp/coverage", "optim.micro_batch_size=8"]


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_config_field_is_declared_once_by_the_backend(backend: str) -> None:
    table, _ = BACKENDS[backend]
    covered = field_coverage(table)
    missing = sorted(TOP_FIELDS - set(covered))
    assert not missing, f"{backend}: fields without a declared handling: {missing}"
    assert set(covered) == TOP_FIELDS and len(TOP_FIELDS) >= 110
    for path, how in covered.items():
        assert how.status in HANDLING_STATUSES and how.detail.strip(), (backend, path)


def test_the_coverage_check_catches_a_missing_or_unknown_field() -> None:
    table = dict(TRL_FIELDS)
    del table["optim.lr"]
    assert "optim.lr" not in field_coverage(table)
    with pytest.raises(ValueError, match="not a config field"):
        field_coverage({**TRL_FIELDS, "optim.lrr": FieldHandling("mapped", "x")})
    with pytest.raises(ValueError, match="declared twice"):
        field_coverage({**TRL_FIELDS, "sft.lr": FieldHandling("unused", "x")})


def _refusals() -> list[tuple[str, str, str]]:
    return [
        (backend, path, overrides)
        for backend, (table, _) in sorted(BACKENDS.items())
        for path, how in field_coverage(table).items()
        for overrides in how.refused
    ]


def test_defaults_are_accepted_by_both_backends() -> None:
    cfg = load_config("quickstart", BASE)
    assert _trl(cfg).rows_per_step == cfg.rollout.env_groups * cfg.rollout.group_size
    assert _verl(cfg).as_dict()["actor_rollout_ref.rollout.n"] == str(cfg.rollout.group_size)


@pytest.mark.parametrize(("backend", "path", "overrides"), _refusals())
def test_each_declared_refusal_is_refused_naming_the_field(
    backend: str, path: str, overrides: str
) -> None:
    _, build = BACKENDS[backend]
    cfg = load_config("quickstart", [*BASE, *overrides.split()])
    with pytest.raises(TrainConfigError) as exc:
        build(cfg)
    leaf = path.rsplit(".", 1)[1]
    assert exc.value.field == path or leaf in str(exc.value), (backend, path, str(exc.value))


def test_refused_status_fields_have_an_example() -> None:
    for backend, (table, _) in BACKENDS.items():
        for path, how in field_coverage(table).items():
            if how.status == "refused":
                assert how.refused, (backend, path)


# ------------------------------------------------------- the generated mapping
#: ``trl_settings(cfg).args`` and ``verl_settings(cfg, ...).as_dict()`` for every preset and
#: the variants below, recorded from the hand-written mappings these tables replaced
#: (commit 2d4eff1); a refused config is recorded as the field its error names.  The tiny
#: model's local path is written ``<tiny-model>``; ``RAGEN_REAL_MODEL`` is pinned.
GOLDEN = Path(__file__).resolve().parents[1] / "data" / "backend_settings.json"
REAL_MODEL = "models/real-instruct"
VERL_ARGS = dict(
    train_files="data/train.parquet",
    val_files="data/val.parquet",
    agent_loop_config="data/agent_loop.yaml",
)


def _produce(case: str, overrides: list[str]) -> dict[str, dict]:
    from ragen_bench.model_dirs import resolve_model_path

    cfg = load_config(case.split("+")[0], overrides)
    tiny = resolve_model_path("tiny")
    out: dict[str, dict] = {}
    for backend, build in (
        ("trl", lambda: trl_settings(cfg).args),
        ("verl", lambda: verl_settings(cfg, **VERL_ARGS).as_dict()),
    ):
        try:
            values = build()
        except TrainConfigError as exc:
            out[backend] = {"refused": exc.field}
            continue
        out[backend] = {"ok": {k: "<tiny-model>" if v == tiny else v for k, v in values.items()}}
    return out


def _golden() -> dict[str, dict]:
    from ragen_train.backends.trl_backend import _checkpointing_arg

    golden = json.loads(GOLDEN.read_text())
    key = _checkpointing_arg()  # the installed transformers' name of the switch
    names = {"gradient_checkpointing", "activation_checkpointing"}
    for rec in golden.values():
        trl = rec["trl"].get("ok")
        (recorded,) = names & set(trl or {"gradient_checkpointing": None})
        if trl is not None:
            trl[key] = trl.pop(recorded)
    return golden


@functools.cache
def _all_produced() -> dict[str, dict[str, dict]]:
    mp = pytest.MonkeyPatch()
    mp.setenv("RAGEN_REAL_MODEL", REAL_MODEL)
    try:
        return {case: _produce(case, rec["overrides"]) for case, rec in _golden().items()}
    finally:
        mp.undo()


def test_the_recorded_cases_cover_every_preset() -> None:
    from ragen_train.presets import PRESETS

    golden = _golden()
    assert set(PRESETS) <= set(golden) and len(golden) > len(PRESETS)
    assert sum("ok" in rec["trl"] for rec in golden.values()) >= 15
    assert sum("ok" in rec["verl"] for rec in golden.values()) >= 30


def test_generated_settings_equal_the_hand_written_mapping_for_every_preset() -> None:
    golden, produced = _golden(), _all_produced()
    for case, rec in golden.items():
        for backend in ("trl", "verl"):
            assert json.loads(json.dumps(produced[case][backend])) == rec[backend], (
                case,
                backend,
            )


#: trl_settings renames the table's gradient_checkpointing to the installed transformers' name.
_TABLE_NAME = {"activation_checkpointing": "gradient_checkpointing"}


def _fixed_keys(backend: str) -> set[str]:
    if backend == "trl":
        return {k for k, _ in TRL_FIXED}
    launch = {
        "data.train_files",
        "data.val_files",
        "data.max_prompt_length",
        "actor_rollout_ref.rollout.name",
        "actor_rollout_ref.rollout.tensor_model_parallel_size",
        "actor_rollout_ref.rollout.agent.agent_loop_config_path",
        "trainer.n_gpus_per_node",
        "trainer.nnodes",
    }
    return {k for k, _ in VERL_FIXED} | launch


@pytest.mark.parametrize("backend", sorted(BACKENDS))
def test_every_table_key_is_produced_and_every_produced_key_comes_from_the_table(
    backend: str,
) -> None:
    table, _ = BACKENDS[backend]
    declared = declared_keys(table)
    produced: set[str] = set()
    for rec in _all_produced().values():
        values = rec[backend].get("ok")
        if values is None:
            continue
        keys = {_TABLE_NAME.get(k, k) for k in values}
        produced |= keys
        stray = keys - set(declared) - _fixed_keys(backend)
        assert not stray, f"{backend}: keys set by no table entry: {sorted(stray)}"
    never = set(declared) - produced
    assert not never, f"{backend}: table keys no recorded config produces: {sorted(never)}"
    assert len(declared) >= 30
    for path in set(declared.values()):
        assert table[path].status in ("mapped", "approximate", "ours"), (backend, path)


def test_every_estimator_sets_only_keys_the_verl_table_declares() -> None:
    from ragen_train.advantages import ADVANTAGE_ESTIMATORS

    declared = declared_keys(VERL_FIELDS)
    for name in ADVANTAGE_ESTIMATORS:
        verl = ADVANTAGE_ESTIMATORS.entry(name).meta["verl"] or {}
        assert set(verl) <= set(VERL_ESTIMATOR_KEYS), name
        assert all(declared[k] == "algorithm.adv_estimator" for k in verl), name
