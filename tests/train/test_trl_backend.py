"""The TRL back-end: settings map onto GRPOConfig, and a short SFT -> TRL GRPO run on Bandit writes our
metrics JSONL and a checkpoint that ``ragen-bench run`` evaluates."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_train.config import TrainConfigError, load_config

trl = pytest.importorskip("trl")

from ragen_train.backends import get_backend  # noqa: E402
from ragen_train.backends.trl_backend import (  # noqa: E402
    groups_from_prompts,
    map_trl_logs,
    ragen_env_return,
    trl_settings,
)


def test_quickstart_maps_onto_grpo_config(tmp_path: Path) -> None:
    # Pinned batch settings, so that the expected numbers do not follow the preset's tuning.
    cfg = load_config(
        "quickstart",
        [f"trainer.out_dir={tmp_path}", "optim.micro_batch_size=32", "trainer.total_steps=20"],
    )
    s = trl_settings(cfg)
    a = s.args
    # 8 groups x 8 members = 64 rows per step, one optimizer step (mini_batches=1) of 2 micro-batches of 32.
    assert (s.rows_per_step, a["num_generations"], a["per_device_train_batch_size"]) == (64, 8, 32)
    assert (a["gradient_accumulation_steps"], a["steps_per_generation"], a["max_steps"]) == (
        2,
        2,
        20,
    )
    assert (a["loss_type"], a["scale_rewards"], a["epsilon"], a["epsilon_high"], a["delta"]) == (
        "dapo",
        "group",
        0.2,
        0.28,
        3.0,
    )
    assert (a["beta"], a["use_vllm"], a["bf16"], a["use_cpu"], a["temperature"]) == (
        0.0,
        False,
        False,
        True,
        1.0,
    )
    args = trl.GRPOConfig(**a)  # TRL's own validation accepts the mapping
    assert args.generation_batch_size == 64 and not args.gradient_checkpointing


def test_dr_grpo_and_batch_shapes(tmp_path: Path) -> None:
    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp_path}",
            "algorithm.adv_estimator=dr_grpo",
            "algorithm.loss_agg_mode=seq-mean-token-sum-norm",
            "algorithm.norm_len=100",
            "optim.mini_batches=2",
            "optim.ppo_epochs=3",
            "optim.micro_batch_size=10",
            "trainer.total_steps=20",
        ],
    )
    a = trl_settings(cfg).args
    assert (a["loss_type"], a["scale_rewards"], a["max_completion_length"]) == (
        "dr_grpo",
        "none",
        100,
    )
    # 32 rows per mini-batch; 10 does not divide 32, so micro-batches of 8 (same loss, only memory differs).
    assert (
        a["per_device_train_batch_size"],
        a["gradient_accumulation_steps"],
        a["steps_per_generation"],
    ) == (8, 4, 8)
    assert (a["num_iterations"], a["max_steps"]) == (3, 20 * 2 * 3)
    seq_sum = trl_settings(
        load_config("quickstart", ["algorithm.loss_agg_mode=seq-mean-token-sum"])
    ).args
    assert (seq_sum["loss_type"], seq_sum["max_completion_length"]) == ("dr_grpo", 1)


@pytest.mark.parametrize(
    "override, field",
    [
        ("algorithm.adv_estimator=gae", "algorithm.adv_estimator"),
        ("algorithm.adv_estimator=rloo", "algorithm.adv_estimator"),
        ("algorithm.kl_coef=0.1 algorithm.kl_estimator=k2", "algorithm.kl_estimator"),
        ("algorithm.filter.loss_scaling=sqrt", "algorithm.filter.loss_scaling"),
        ("algorithm.filter.metric=entropy", "algorithm.filter.metric"),
    ],
)
def test_settings_without_a_trl_counterpart_are_refused(override: str, field: str) -> None:
    with pytest.raises(TrainConfigError) as err:
        trl_settings(load_config("quickstart", override.split()))
    assert err.value.field == field


def test_delta_reproduces_our_dual_clip_loss_and_gradient() -> None:
    """TRL's loss with ``delta`` (grpo_trainer.py, _compute_loss: coef_2 = clamp(r, 1-eps, 1+eps_high);
    coef_1 = clamp(r, max=delta); L = -min(coef_1 A, coef_2 A)) equals our dual-clip PPO loss."""
    import torch

    from ragen_train.losses import ppo_policy_loss

    gen = torch.Generator().manual_seed(0)
    logp = (torch.randn(4, 64, generator=gen) * 1.5).requires_grad_(True)
    old = torch.zeros(4, 64)
    adv = torch.randn(4, 64, generator=gen)
    ours, _ = ppo_policy_loss(
        logp, old, adv, torch.ones(4, 64), clip_low=0.2, clip_high=0.28, dual_clip=3.0
    )
    (g_ours,) = torch.autograd.grad(ours.sum(), logp)
    r = torch.exp(logp - old)
    theirs = -torch.min(torch.clamp(r, max=3.0) * adv, torch.clamp(r, 0.8, 1.28) * adv)
    (g_theirs,) = torch.autograd.grad(theirs.sum(), logp)
    assert (r > 3.0).any() and ((r > 3.0) & (adv < 0)).any()  # the dual-clip region is exercised
    assert torch.allclose(ours, theirs) and torch.allclose(g_ours, g_theirs)


def test_multi_turn_per_turn_samples_are_refused(tmp_path: Path) -> None:
    from ragen_train.backends.trl_backend import RagenRolloutFunc

    cfg = load_config(
        "tiny-sokoban-grpo", [f"trainer.out_dir={tmp_path}"]
    )  # single_turn mode, 6 turns
    with pytest.raises(TrainConfigError, match="one sequence per episode"):
        RagenRolloutFunc(cfg, tokenizer=None)


def test_reward_function_and_prompt_groups() -> None:
    assert ragen_env_return([], [], ragen_reward=[1.0, -0.1, float("nan")]) == [1.0, -0.1, None]
    tag = lambda g: [{"role": "user", "content": f"ragen:ragen/Bandit-v0:group={g}"}]  # noqa: E731
    assert groups_from_prompts([tag(2), tag(2), tag(0), tag(0)], 2) == [2, 0]
    with pytest.raises(ValueError, match="mix groups"):
        groups_from_prompts([tag(1), tag(2)], 2)
    logs = map_trl_logs(
        {"loss": 0.5, "grad_norm": 2.0, "entropy": 1.5, "rewards/x/mean": 0.1, "epoch": 1.0}
    )
    assert logs == {
        "trl/loss": 0.5,
        "actor/grad_norm": 2.0,
        "actor/entropy": 1.5,
        "trl/rewards/x/mean": 0.1,
        "actor/pg_loss": 0.5,
    }


def test_sft_then_trl_run_writes_metrics_and_an_evaluable_checkpoint(tmp_path: Path) -> None:
    from ragen_bench.rollout import rollout_config
    from ragen_bench.validate import validate_file
    from ragen_train.modeling import load_policy, load_tokenizer
    from ragen_train.sft import sft_samples, sft_train

    out = tmp_path / "run"
    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={out}",
            "rollout.env_groups=2",
            "rollout.group_size=4",
            "rollout.max_new_tokens=16",
            "trainer.total_steps=2",
            "trainer.val_every=1",
            "trainer.val_episodes=4",
            "trainer.save_every=2",
            "trainer.loggers=jsonl",
            "sft.episodes=16",
            "sft.steps=3",
            "sft.batch_size=8",
            "sft.micro_batch_size=8",
        ],
    )
    tok, model = load_tokenizer(cfg.model.path), load_policy(cfg.model)
    hist = sft_train(
        model,
        tok,
        sft_samples(cfg, tok, rollout_config(cfg.env.id, cfg.rollout, temperature=1.0)),
        cfg,
    )
    assert len(hist) == 3 and all(math.isfinite(h["sft/loss"]) for h in hist)

    res = get_backend("trl").train(cfg, model=model, tokenizer=tok)

    assert (
        validate_file(res.metrics_path, "metrics")[1] == 5
    )  # val@0, train@1, val@1, train@2, val@2
    rows = [json.loads(x) for x in res.metrics_path.read_text().splitlines()]
    assert [(r["step"], r["phase"]) for r in rows] == [
        (0, "val"),
        (1, "train"),
        (1, "val"),
        (2, "train"),
        (2, "val"),
    ]
    for r in rows:
        if r["phase"] == "train":
            for key in (
                "train/success",
                "train/return",
                "train/format_valid_rate",
                "train/pass@4",
                "batch/episodes",
                "filter/kept_ratio",
                "actor/grad_norm",
                "actor/pg_loss",
                "batch/response_tokens",
                "time/rollout_s",
                "time/step_s",
            ):
                assert key in r and r[key] is not None and math.isfinite(r[key]), (key, r.get(key))
            assert r["batch/episodes"] == 8.0
        else:
            assert {"val/success", "val/return", "val/format_valid_rate"} <= set(r)
    ckpt = res.checkpoint_dir
    assert (ckpt / "config.json").is_file() and (
        out / "checkpoints" / "step_000002" / "model" / "config.json"
    ).is_file()

    runs = tmp_path / "runs"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "ragen_bench",
            "run",
            "--env",
            "ragen/Bandit-PairsAB-v0",
            "--backend",
            "hf",
            "--model",
            str(ckpt),
            "--episodes",
            "4",
            "--max-new-tokens",
            "16",
            "--out",
            str(runs),
            "--run-id",
            "trl",
            "--no-progress",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert validate_file(runs / "trl" / "episodes.jsonl")[1] == 4
    validate_file(runs / "trl" / "summary.json")


def test_trl_eps_effect_is_large_on_near_constant_groups() -> None:
    """The figure docs/backends.md gives for TRL's ``std + 1e-4`` is right.

    TRL's formula is taken from ``GRPOTrainer._generate_and_score_completions`` (TRL 1.16,
    ``scale_rewards="group"``): ``(r - nanmean_g) / (nanstd_g + 1e-4)`` with TRL's own
    ``nanstd`` (unbiased); the native one is :func:`group_advantages` with ``grpo_eps``.
    """
    import torch
    from trl.trainer.utils import nanstd

    from ragen_train.advantages import group_advantages

    rewards = torch.tensor([1.00000, 1.00001, 2.00000, 2.00001])  # float32, as TRL holds rewards
    grouped = rewards.view(-1, 2)
    mean = torch.nanmean(grouped, dim=1).repeat_interleave(2)
    std = nanstd(grouped, dim=1).repeat_interleave(2)
    trl_adv = (rewards - mean) / (std + 1e-4)
    native, _ = group_advantages(
        torch.tensor([1.00000, 1.00001, 2.00000, 2.00001], dtype=torch.float64),
        torch.tensor([0, 0, 1, 1]),
        eps=load_config("quickstart").algorithm.grpo_eps,
    )
    assert trl_adv.tolist() == pytest.approx([-0.0468, 0.0468, -0.0468, 0.0468], abs=5e-5)
    assert native.tolist() == pytest.approx([-0.6195, 0.6195, -0.6195, 0.6195], abs=5e-5)
    doc = (Path(__file__).resolve().parents[2] / "docs" / "backends.md").read_text()
    assert "**±0.0468**" in doc and "**±0.6195**" in doc
    assert "differ by ~1e-4 relative" not in doc
    # The ratio table: TRL / native = (std + 1e-6) / (std + 1e-4).
    for s, ratio in ((0.35, 0.9997), (1e-2, 0.990), (1e-3, 0.91), (1e-4, 0.505)):
        assert (s + 1e-6) / (s + 1e-4) == pytest.approx(ratio, abs=5e-4)


def test_batch_shape_takes_the_largest_full_micro_batch() -> None:
    from ragen_train.backends.trl_backend import TRLBatchShape, trl_batch_shape

    # 64 rows, 1 process, 1 mini-batch of 64, micro-batches of at most 32: 2 of 32.
    assert trl_batch_shape(64, 1, 1, 32) == TRLBatchShape(32, 2, 2)
    # 2 mini-batches of 32 rows; at most 3 per micro-batch: 32's largest divisor <= 3 is 2.
    assert trl_batch_shape(64, 1, 2, 3) == TRLBatchShape(2, 16, 32)
    # 48 rows over 2 processes: 24 each; at most 5: 4 rows x 6 accumulation steps.
    assert trl_batch_shape(48, 2, 1, 5) == TRLBatchShape(4, 6, 6)
    # fewer rows than processes x mini-batches: one row per process, one step.
    assert trl_batch_shape(2, 4, 1, 8) == TRLBatchShape(1, 1, 1)
