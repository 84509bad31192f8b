"""Every training-config field is handled — mapped, done by our code, approximated, unused
with a reason, or refused — by each external back-end, and the refusals are real.

The tables are ``TRL_FIELDS`` (ragen_train/backends/trl_backend.py) and ``VERL_FIELDS``
(verl_backend.py); a field added to ``ragen_train/config.py`` fails here until both say what
they do with it.
"""

from __future__ import annotations

import pytest

from ragen_train.backends.common import HANDLING_STATUSES, FieldHandling, field_coverage
from ragen_train.backends.trl_backend import TRL_FIELDS, trl_settings
from ragen_train.backends.verl_backend import VERL_FIELDS, verl_settings
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
