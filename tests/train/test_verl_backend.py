"""The verl back-end without verl's runtime: the config mapping, the dataset rows (seeds and splits), the
launch files, the guarded import, and the episode-log -> metrics conversion.  (The agent loop's
tokens, masks and rewards are checked against the native trainer in test_backend_equivalence.py.)"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ragen_train.backends.verl_agent_loop import RagenLoopSettings, row_fields
from ragen_train.backends.verl_backend import (
    VERL_NO_GPU_STOP,
    dataset_rows,
    gpu_shortfall,
    metrics_from_episode_log,
    verl_settings,
    visible_accelerators,
    write_verl_inputs,
)
from ragen_train.config import TrainConfigError, load_config
from ragen_train.presets import PRESETS

HAVE_VERL = importlib.util.find_spec("verl") is not None


def settings(*overrides: str):
    cfg = load_config(
        "quickstart", ["trainer.out_dir=/tmp/x", "trainer.total_steps=20", *overrides]
    )
    return cfg, verl_settings(
        cfg, train_files="t.parquet", val_files="v.parquet", agent_loop_config="a.yaml"
    ).as_dict()


def test_quickstart_overrides() -> None:
    cfg, o = settings()
    assert (
        o["algorithm.adv_estimator"] == "grpo" and o["algorithm.norm_adv_by_std_in_grpo"] == "true"
    )
    assert (
        o["actor_rollout_ref.rollout.n"] == "8" and o["data.train_batch_size"] == "8"
    )  # group_size, env_groups
    assert (
        o["actor_rollout_ref.actor.ppo_mini_batch_size"] == "8"
    )  # groups per optimizer step (mini_batches=1)
    assert (
        o["actor_rollout_ref.actor.clip_ratio_low"],
        o["actor_rollout_ref.actor.clip_ratio_high"],
        o["actor_rollout_ref.actor.clip_ratio_c"],
    ) == ("0.2", "0.28", "3.0")
    assert o["actor_rollout_ref.actor.loss_agg_mode"] == "token-mean"
    assert (
        o["actor_rollout_ref.actor.use_kl_loss"] == "false"
        and o["algorithm.use_kl_in_reward"] == "false"
    )
    assert (
        o["data.shuffle"] == "false"
        and o["trainer.total_training_steps"] == "20"
        and o["trainer.test_freq"] == "5"
    )
    assert o["actor_rollout_ref.rollout.agent.default_agent_loop"] == "ragen_agent"
    assert o["actor_rollout_ref.rollout.val_kwargs.temperature"] == "0.5"
    assert Path(
        o["actor_rollout_ref.model.path"]
    ).is_dir()  # "tiny" resolved to the built model directory


@pytest.mark.parametrize(
    "overrides, expect",
    [
        (
            [
                "algorithm.adv_estimator=dr_grpo",
                "algorithm.loss_agg_mode=seq-mean-token-sum-norm",
                "algorithm.norm_len=64",
            ],
            {
                "algorithm.norm_adv_by_std_in_grpo": "false",
                "actor_rollout_ref.actor.loss_scale_factor": "64.0",
            },
        ),
        (
            ["algorithm.adv_estimator=gae", "optim.critic_lr=3e-5"],
            {
                "algorithm.adv_estimator": "gae",
                "critic.optim.lr": "3e-05",
                "critic.cliprange_value": "0.5",
            },
        ),
        (
            ["algorithm.kl_coef=0.01", "algorithm.kl_estimator=k2"],
            {
                "actor_rollout_ref.actor.use_kl_loss": "true",
                "actor_rollout_ref.actor.kl_loss_type": "mse",
                "actor_rollout_ref.actor.kl_loss_coef": "0.01",
            },
        ),
        (
            ["algorithm.kl_coef=0.01", "algorithm.kl_in_reward=true"],
            {
                "algorithm.use_kl_in_reward": "true",
                "algorithm.kl_penalty": "low_var_kl",
                "algorithm.kl_ctrl.kl_coef": "0.01",
            },
        ),
        (
            ["algorithm.filter.include_zero=false"],
            {"algorithm.filter_groups.enable": "true", "algorithm.filter_groups.metric": "reward"},
        ),
        (
            ["optim.mini_batches=4", "optim.ppo_epochs=2"],
            {
                "actor_rollout_ref.actor.ppo_mini_batch_size": "2",
                "actor_rollout_ref.actor.ppo_epochs": "2",
            },
        ),
    ],
)
def test_algorithm_settings_map(overrides: list[str], expect: dict[str, str]) -> None:
    _, o = settings(*overrides)
    for k, v in expect.items():
        assert o[k] == v, k


@pytest.mark.parametrize(
    "override, field",
    [
        ("algorithm.adv_estimator=bilevel_gae", "algorithm.adv_estimator"),
        ("algorithm.filter.value=0.5", "algorithm.filter.value"),  # the field itself
        ("algorithm.filter.loss_scaling=linear", "algorithm.filter.loss_scaling"),
    ],
)
def test_unsupported_settings_are_refused(override: str, field: str) -> None:
    with pytest.raises(TrainConfigError) as err:
        settings(override)
    assert err.value.field == field


RAGEN2_PRESETS = sorted(n for n in PRESETS if n.startswith("ragen2-"))


def test_every_ragen2_recipe_is_refused_for_its_top_p_filter() -> None:
    """The RAGEN-2 recipes keep the top 90% of groups by reward std (top_p 0.9); verl 0.9.1
    has only DAPO's zero-variance filter, so each recipe is refused with this reason (with the
    filter off, verl's own validate_config accepts all of them: test_verl_installed.py)."""
    assert len(RAGEN2_PRESETS) == 32
    for name in RAGEN2_PRESETS:
        with pytest.raises(TrainConfigError) as err:
            verl_settings(
                load_config(name, []), train_files="t", val_files="v", agent_loop_config="a"
            )
        assert err.value.field == "algorithm.filter.value", name
        assert err.value.reason == (
            "cannot run on verl: algorithm.filter.value: top_p 0.9 filtering has no verl "
            "counterpart (only DAPO's zero-variance group filter); run with "
            "algorithm.filter.value=1 (keep every group), plus algorithm.filter.include_zero=false "
            "for DAPO's filter"
        ), name
        for fix in (
            ["algorithm.filter.value=1"],
            ["algorithm.filter.value=1", "algorithm.filter.include_zero=false"],
        ):
            o = verl_settings(
                load_config(name, fix), train_files="t", val_files="v", agent_loop_config="a"
            ).as_dict()
            assert o.get("algorithm.filter_groups.enable", "false") == str(len(fix) == 2).lower()


def test_gpu_shortfall_is_said_before_ray_starts() -> None:
    """A one-node run needs trainer.n_gpus_per_node devices here (launch.sh's environment
    variables first); multi-node runs and runs joining a Ray cluster are not checked."""
    cfg = load_config("quickstart", ["trainer.out_dir=/tmp/x"])
    s = verl_settings(cfg, train_files="t", val_files="v", agent_loop_config="a", n_gpus_per_node=2)
    have = visible_accelerators()
    msg = gpu_shortfall(s, env={})
    if have >= 2:
        assert msg is None
    else:
        assert "verl needs 2 GPU(s) on this machine" in msg and f"torch sees {have}" in msg
        if have == 0:
            assert VERL_NO_GPU_STOP.format(available=0, desired=2) in msg
    wants = have + 1  # RAGEN_VERL_GPUS_PER_NODE wins over the generated value, as in launch.sh
    assert f"verl needs {wants} GPU(s)" in gpu_shortfall(
        s, env={"RAGEN_VERL_GPUS_PER_NODE": str(wants)}
    )
    assert gpu_shortfall(s, env={"RAGEN_VERL_GPUS_PER_NODE": str(have)}) is None
    assert (
        gpu_shortfall(s, env={"RAGEN_VERL_GPUS_PER_NODE": "64", "RAGEN_VERL_NNODES": "2"}) is None
    )
    assert gpu_shortfall(s, env={"RAGEN_VERL_GPUS_PER_NODE": "64", "RAY_ADDRESS": "h:6379"}) is None


def test_dataset_rows_give_the_native_seeds_and_splits() -> None:
    cfg = load_config(
        "quickstart", ["rollout.env_groups=3", "trainer.total_steps=4", "trainer.val_episodes=5"]
    )
    train, val = dataset_rows(cfg)
    assert len(train) == 12 and len(val) == 5
    for k in range(4):  # rows of step k (data.train_batch_size = env_groups, no shuffling)
        for g in range(3):
            info = row_fields(train[k * 3 + g])
            assert (
                info["ragen_seed"],
                info["ragen_group"],
                info["ragen_step"],
                info["ragen_split"],
            ) == (k * 3 + g, g, k, "train")
    assert [row_fields(r)["ragen_seed"] for r in val] == [0, 1, 2, 3, 4]
    assert {row_fields(r)["ragen_split"] for r in val} == {"validation"}
    with pytest.raises(KeyError, match="ragen_seed"):
        row_fields({"extra_info": {}})


def test_launch_files(tmp_path: Path) -> None:
    pq = pytest.importorskip("pyarrow.parquet")
    cfg = load_config("quickstart", [f"trainer.out_dir={tmp_path}", "trainer.total_steps=3"])
    launch = write_verl_inputs(cfg, n_gpus_per_node=4)
    assert pq.read_table(launch.files["train"]).num_rows == 3 * 8
    text = launch.files["launch"].read_text()
    assert text.startswith("#!/usr/bin/env bash") and "python3 -m verl.trainer.main_ppo" in text
    assert (
        'trainer.n_gpus_per_node="${RAGEN_VERL_GPUS_PER_NODE:-4}"' in text
        and str(launch.files["agent_loop"]) in text
    )
    assert "trainer.n_gpus_per_node=4" in launch.command
    import subprocess

    assert (
        subprocess.run(["bash", "-n", str(launch.files["launch"])]).returncode == 0
    )  # valid shell
    yaml_text = launch.files["agent_loop"].read_text()
    assert "_target_: ragen_train.backends.verl_agent_loop.RagenAgentLoop" in yaml_text
    carried = json.loads(yaml_text.split("ragen_settings: ", 1)[1])  # a JSON string in YAML
    yaml = pytest.importorskip("yaml")
    (entry,) = yaml.safe_load(yaml_text)  # what verl's OmegaConf.load reads
    assert (
        entry["name"] == "ragen_agent"
        and entry["ragen_settings"] == carried
        and "${" not in carried
    )
    loop = RagenLoopSettings.from_json(carried)
    assert (
        loop.env_id == "ragen/Bandit-PairsAB-v0"
        and loop.rollout_config().context_mode == "single_turn"
    )


@pytest.mark.skipif(HAVE_VERL, reason="verl is installed here")
def test_agent_loop_class_import_is_guarded_and_cli_says_so(tmp_path: Path) -> None:
    import ragen_train.backends.verl_agent_loop as m
    from ragen_train.cli import app

    with pytest.raises(ImportError, match="verl"):
        m.RagenAgentLoop  # noqa: B018
    res = CliRunner().invoke(
        app,
        ["starpo", "--trainer", "verl", "--config", "quickstart", f"trainer.out_dir={tmp_path}"],
    )
    assert res.exit_code == 2 and "verl" in res.output
    assert (tmp_path / "verl" / "launch.sh").is_file()  # prepared before refusing to run
    assert "deprecated" not in res.output
    res = CliRunner().invoke(app, ["starpo", "--trainer", "nope", "--config", "quickstart"])
    assert res.exit_code == 2 and "unknown trainer back-end" in res.output
    # the old spelling still works for one release, with a warning
    old = tmp_path / "old"
    res = CliRunner().invoke(
        app, ["starpo", "--backend", "verl", "--config", "quickstart", f"trainer.out_dir={old}"]
    )
    assert res.exit_code == 2 and (old / "verl" / "launch.sh").is_file()
    assert "--backend is deprecated in ragen-train" in res.stderr and "--trainer verl" in res.stderr
    res = CliRunner().invoke(app, ["starpo", "--trainer", "trl", "--backend", "verl"])
    assert res.exit_code == 2 and "disagree" in res.stderr


def test_episode_log_becomes_native_metric_rows() -> None:
    cfg = load_config(
        "quickstart",
        [
            "rollout.env_groups=2",
            "rollout.group_size=2",
            "trainer.total_steps=2",
            "trainer.val_every=1",
            "trainer.val_episodes=2",
        ],
    )

    def line(phase, step, seed, group, ret, success):
        return {
            "phase": phase,
            "step": step,
            "seed": seed,
            "group": group,
            "status": "success" if success else "failure",
            "success": success,
            "return": ret,
            "metrics": {"success": float(success), "return": ret},
        }

    log = [line("val", -1, 0, 0, 0.0, False), line("val", -1, 1, 1, 1.0, True)]
    for k in range(2):
        log += [
            line("train", k, 2 * k + g, g, float(m == 0 and k == 1), m == 0 and k == 1)
            for g in range(2)
            for m in range(2)
        ]
        log += [line("val", -1, 0, 0, 1.0, True), line("val", -1, 1, 1, 1.0, True)]
    rows = metrics_from_episode_log(log, cfg)
    assert [(s, p) for s, p, _ in rows] == [
        (0, "val"),
        (1, "train"),
        (1, "val"),
        (2, "train"),
        (2, "val"),
    ]
    assert rows[0][2]["val/success"] == 0.5 and rows[2][2]["val/success"] == 1.0
    assert rows[1][2]["train/success"] == 0.0 and rows[3][2]["train/success"] == 0.5
    assert rows[3][2]["train/pass@2"] == 1.0 and rows[3][2]["train/in_group_reward_std"] == 0.5


def test_response_length_and_loggers_transforms() -> None:
    from ragen_train.backends.verl_backend import verl_loggers, verl_response_length

    assert verl_response_length(5, 100) == 1780  # 5 x (100 + 256)
    assert verl_response_length(1, 0) == 256
    assert verl_loggers(["jsonl", "wandb", "tensorboard"]) == ["console", "wandb", "tensorboard"]
    assert verl_loggers(["jsonl"]) == ["console"]
