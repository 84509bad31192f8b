"""Every estimator, loss, aggregation mode, KL estimator and back-end
name lives in one registry, and the trainer config's rollout/filter shapes are the bench's."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import torch

from ragen_bench.registry import Registry, UnknownNameError
from ragen_bench.rollout import PROTOCOL_FIELDS, RolloutConfig, protocol_overrides
from ragen_bench.types import SamplingParams
from ragen_train.advantages import ADVANTAGE_ESTIMATORS, grpo, register_estimator
from ragen_train.backends import TRAINER_BACKENDS
from ragen_train.config import (
    FilterSection,
    RolloutSection,
    StarPOConfig,
    TrainConfigError,
    apply_overrides,
    config_json_schema,
    load_config,
)
from ragen_train.filtering import STRATEGIES, FilterConfig
from ragen_train.losses import AGG_MODES, KL_ESTIMATORS, aggregate, kl_penalty

ROOT = Path(__file__).resolve().parents[2]


def test_registry_lookups_fail_naming_the_known_names() -> None:
    reg: Registry[int] = Registry("widget")
    reg.register("alpha", colour="red")(1)
    reg.add("beta", 2, colour="blue")
    assert reg.names() == ("alpha", "beta") and reg.names(colour="blue") == ("beta",)
    assert (
        reg.get("beta") == 2
        and reg.meta("alpha", "colour") == "red"
        and "alpha" in reg
        and len(reg) == 2
    )
    with pytest.raises(UnknownNameError) as exc:
        reg.get("alpah")
    assert isinstance(exc.value, KeyError) and isinstance(exc.value, ValueError)
    assert str(exc.value) == "unknown widget 'alpah' (did you mean 'alpha'?); known: alpha, beta"
    with pytest.raises(ValueError, match="already registered"):
        reg.add("alpha", 3)
    assert reg.remove("beta").obj == 2 and reg.names() == ("alpha",)


def test_config_choices_and_schema_enums_are_the_registry_names() -> None:
    schema = config_json_schema()["properties"]["algorithm"]["properties"]
    assert schema["adv_estimator"]["enum"] == ["grpo", "dr_grpo", "rloo", "gae", "bilevel_gae"]
    assert schema["adv_estimator"]["enum"] == list(ADVANTAGE_ESTIMATORS)
    assert schema["loss_agg_mode"]["enum"] == list(AGG_MODES)
    assert schema["kl_estimator"]["enum"] == list(KL_ESTIMATORS) == ["k1", "k2", "k3", "abs"]
    assert schema["filter"]["properties"]["strategy"]["enum"] == sorted(STRATEGIES)
    assert list(TRAINER_BACKENDS) == ["native", "trl", "verl"]
    with pytest.raises(TrainConfigError, match="must be one of") as exc:
        apply_overrides(StarPOConfig(), ["algorithm.kl_estimator=k4"])
    assert exc.value.field == "algorithm.kl_estimator"


def test_estimator_metadata_not_names_drive_the_trainer_config_and_mappings(
    tmp_path: Path,
) -> None:
    """A plug-in estimator registered at run time is accepted by the config, gets the group
    size check of an outcome estimator and maps to TRL/verl through its own metadata."""
    from ragen_train.backends.trl_backend import trl_settings
    from ragen_train.backends.verl_backend import verl_settings

    register_estimator(
        "grpo_plugin",
        level="outcome",
        needs_critic=False,
        trl={"scale_rewards": "group"},
        verl={"algorithm.adv_estimator": "grpo", "algorithm.norm_adv_by_std_in_grpo": True},
    )(grpo)
    try:
        cfg = load_config(
            "quickstart", [f"trainer.out_dir={tmp_path}", "algorithm.adv_estimator=grpo_plugin"]
        )
        with pytest.raises(TrainConfigError, match="needs groups of at least 2") as exc:
            apply_overrides(cfg, ["rollout.group_size=1"])
        assert exc.value.field == "rollout.group_size"
        assert trl_settings(cfg).args["scale_rewards"] == "group"
        verl = verl_settings(
            cfg, train_files="t.parquet", val_files="v.parquet", agent_loop_config="a.yaml"
        ).as_dict()
        assert (
            verl["algorithm.adv_estimator"] == "grpo"
            and verl["algorithm.norm_adv_by_std_in_grpo"] == "true"
        )
        assert "critic.optim.lr" not in verl
    finally:
        ADVANTAGE_ESTIMATORS.remove("grpo_plugin")
    with pytest.raises(TrainConfigError, match="grpo_plugin"):
        apply_overrides(StarPOConfig(), ["algorithm.adv_estimator=grpo_plugin"])


@pytest.mark.parametrize("name", list(ADVANTAGE_ESTIMATORS))
def test_estimator_metadata_is_complete(name: str) -> None:
    meta = ADVANTAGE_ESTIMATORS.entry(name).meta
    assert meta["level"] in ("outcome", "token")
    assert meta["needs_critic"] == (
        meta["level"] == "token"
    )  # today's token-level estimators read values
    assert (meta["trl"] is None) == bool(meta["trl_why"])
    assert (meta["verl"] is None) == bool(meta["verl_why"])


def test_aggregation_and_kl_dispatch_through_the_registries() -> None:
    loss = torch.tensor([[1.0, 2.0, 3.0], [4.0, 0.0, 0.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    expected = {
        "token-mean": 10 / 4,
        "seq-mean-token-mean": (2.0 + 4.0) / 2,
        "seq-mean-token-sum": (6 + 4) / 2,
        "seq-mean-token-sum-norm": (6 + 4) / 2 / 3,
    }
    assert {m: aggregate(loss, mask, m).item() for m in AGG_MODES} == pytest.approx(expected)
    x = torch.tensor([0.5])
    got = {k: kl_penalty(x, torch.zeros(1), k).item() for k in KL_ESTIMATORS}
    assert got == pytest.approx({"k1": 0.5, "k2": 0.125, "k3": 0.10653066, "abs": 0.5})
    assert {k: KL_ESTIMATORS.meta(k, "verl") for k in KL_ESTIMATORS} == {
        "k1": "kl",
        "k2": "mse",
        "k3": "low_var_kl",
        "abs": "abs",
    }


def test_presets_command_lists_the_registered_names() -> None:
    from typer.testing import CliRunner

    from ragen_train.cli import app

    res = CliRunner().invoke(app, ["presets"])
    assert res.exit_code == 0
    lines = {
        line.split(":")[0]: line
        for line in res.stdout.splitlines()
        if line.startswith("algorithm.")
    }
    assert lines["algorithm.adv_estimator"].endswith(
        "grpo, dr_grpo, rloo, gae (critic), bilevel_gae (critic)"
    )
    assert all(m in lines["algorithm.loss_agg_mode"] for m in AGG_MODES)
    assert all(k in lines["algorithm.kl_estimator"] for k in KL_ESTIMATORS)
    help_text = CliRunner().invoke(app, ["starpo", "--help"], env={"COLUMNS": "200"}).stdout
    assert "native | trl | verl" in help_text


def test_filter_section_is_the_filter_config() -> None:
    assert FilterSection is FilterConfig
    assert StarPOConfig().algorithm.filter == FilterConfig()
    with pytest.raises(TrainConfigError) as exc:
        apply_overrides(StarPOConfig(), ["algorithm.filter.metric=variance"])
    assert exc.value.field == "algorithm.filter.metric" and "must be one of" in exc.value.reason


def test_rollout_protocol_fields_are_the_rollout_configs() -> None:
    section = {f.name: f.default for f in dataclasses.fields(RolloutSection)}
    bench = {f.name: f.default for f in dataclasses.fields(RolloutConfig)}
    for name in PROTOCOL_FIELDS:
        assert name in bench, name
        # the per-env budgets default to None (= the env's agent_defaults); the rest are the bench's defaults
        assert section[name] == (
            None if name in ("max_turns", "max_actions_per_turn") else bench[name]
        ), name
    assert section["format_penalty"] == RolloutConfig.format_penalty == -0.1
    assert (section["temperature"], section["top_p"]) == (
        SamplingParams.temperature,
        SamplingParams.top_p,
    )
    cfg = load_config("tiny-sokoban-grpo")
    proto = protocol_overrides(cfg.rollout, temperature=0.25)
    assert set(proto) == {*PROTOCOL_FIELDS, "sampling"}
    assert proto["sampling"] == {
        "temperature": 0.25,
        "top_p": cfg.rollout.top_p,
        "max_new_tokens": cfg.rollout.max_new_tokens,
    }
    assert (
        proto["max_turns"] == cfg.rollout.max_turns
        and proto["format_penalty"] == cfg.rollout.format_penalty
    )
    RolloutConfig(
        **{k: v for k, v in proto.items() if k != "sampling" and v is not None}
    )  # the same shape


def test_look_alike_names_are_renamed() -> None:
    import ragen_bench.policies as policies
    import ragen_envs
    import ragen_train.backends as backends
    import ragen_train.config as config

    assert not hasattr(policies, "BACKENDS") and not hasattr(backends, "BACKENDS")
    assert config.TrainConfigError is not ragen_envs.ConfigError
    assert not issubclass(config.TrainConfigError, ragen_envs.ConfigError)
    assert not (ROOT / "ragen_bench" / "policies" / "baselines.py").exists()
    assert (ROOT / "ragen_bench" / "policies" / "privileged.py").is_file()
    assert not (ROOT / "ragen_bench" / "diagnostics" / "cli.py").exists()
    for folder in ("bench", "train", "helpers"):
        assert (ROOT / "tests" / folder / "__init__.py").read_text() == ""
