"""The ``verl`` back-end: config mapping, dataset and launch files for verl's PPO trainer with our agent loop.

verl (verl-project/verl) trains on GPU clusters (Ray, FSDP/Megatron, vLLM/SGLang
servers); it is not installed on CPU machines.  This module prepares everything a run
needs and launches it where verl exists:

* :func:`verl_settings` — our :class:`~ragen_train.config.StarPOConfig` as Hydra overrides
  of ``verl/trainer/config/ppo_trainer.yaml`` (``python -m verl.trainer.main_ppo``), with a
  note per setting (``docs/backends.md`` has the table);
* :func:`dataset_rows` — one verl dataset row per episode *group*: row ``k · env_groups
  + g`` of the train file is group ``g`` of step ``k`` with env seed ``k · env_groups + g``
  (``data.shuffle=False``, ``data.train_batch_size = env_groups``, ``rollout.n =
  group_size``: verl repeats each row ``n`` times, so the members share the seed, as in
  the native trainer); the validation file has seeds ``0..val_episodes-1`` of the
  validation split;
* :func:`write_verl_inputs` — ``train.parquet``, ``val.parquet``, ``agent_loop.yaml``
  (registers :class:`~ragen_train.backends.verl_agent_loop.RagenAgentLoop` as
  ``ragen_agent`` with the run's agent-loop settings), ``overrides.txt`` and ``launch.sh``;
* :func:`metrics_from_episode_log` — the agent loop's per-episode log turned into our
  ``metrics.jsonl`` rows (``train/*`` per step, ``val/*`` per validation round);
* :func:`gpu_shortfall` — why a one-node run cannot start on this machine (too few GPUs;
  verl 0.9.1 has no CPU platform), said by :class:`VerlBackend` before Ray starts.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_envs import jsonutil

from ..advantages import ADVANTAGE_ESTIMATORS
from ..config import StarPOConfig, TrainConfigError
from ..losses import AGG_MODES, KL_ESTIMATORS
from ..schedules import LR_SCHEDULES
from .base import BackendResult
from .common import FieldHandling, MappingNote, handling, require_one_row_per_episode
from .field_map import UNSET, loss_normaliser, none_or, positive_or, sets, settings_from_table
from .verl_agent_loop import AGENT_NAME, RagenLoopSettings

#: Overrides that ``launch.sh`` reads from environment variables (the cluster shape).
LAUNCH_ENV = {
    "trainer.n_gpus_per_node": "RAGEN_VERL_GPUS_PER_NODE",
    "trainer.nnodes": "RAGEN_VERL_NNODES",
    "actor_rollout_ref.rollout.tensor_model_parallel_size": "RAGEN_VERL_TP",
}


#: Prefixes of verl's actor, rollout and critic config keys (``ppo_trainer.yaml``).
ACTOR = "actor_rollout_ref.actor."
ROLLOUT = "actor_rollout_ref.rollout."
CRITIC = "critic."
#: The verl keys an estimator's ``verl`` overrides (:data:`ragen_train.advantages.ADVANTAGE_ESTIMATORS`)
#: may set; a test checks every registered estimator stays within them.
VERL_ESTIMATOR_KEYS = ("algorithm.adv_estimator", "algorithm.norm_adv_by_std_in_grpo")


def _micro(p: VerlPlan) -> int:
    return p.cfg.optim.micro_batch_size


def verl_loggers(loggers: list[str]) -> list[str]:
    """verl's ``trainer.logger``: the console, plus those of ours verl also has
    (``["jsonl", "wandb"] -> ["console", "wandb"]``)."""
    return ["console"] + [x for x in loggers if x in ("wandb", "tensorboard")]


_LOOP = "played by RagenAgentLoop with our rollout engine, as natively"
_NATIVE_ONLY = "native trainer only"

#: How the verl back-end handles every config field (a section key covers all its fields);
#: ``tests/train/test_backend_coverage.py`` checks the table is complete and that every
#: ``refused`` example is refused by :func:`verl_settings`.
VERL_FIELDS: dict[str, FieldHandling] = {
    "name": sets("mapped", "trainer.experiment_name", "trainer.experiment_name"),
    "model.path": sets(
        "mapped",
        "actor_rollout_ref.model.path (and the critic's)",
        {
            "actor_rollout_ref.model.path": lambda p: p.model_path,
            "critic.model.path": lambda p: p.model_path if p.critic else UNSET,
        },
    ),
    "model.dtype": handling("unused", "verl's FSDP mixed-precision settings decide"),
    "model.device": handling("unused", "verl places its workers on the cluster's GPUs"),
    "model.gradient_checkpointing": sets(
        "mapped",
        "model.enable_gradient_checkpointing",
        {
            "actor_rollout_ref.model.enable_gradient_checkpointing": lambda p: (
                p.cfg.model.gradient_checkpointing
            )
        },
    ),
    "model.mixed_precision": handling(
        "approximate", "verl's FSDP always computes in bf16 over float32 master weights"
    ),
    "model.lora.rank": sets(
        "mapped",
        "model.lora_rank",
        {"actor_rollout_ref.model.lora_rank": lambda p: p.lora(p.cfg.model.lora.rank)},
    ),
    "model.lora.alpha": sets(
        "mapped",
        "model.lora_alpha",
        {"actor_rollout_ref.model.lora_alpha": lambda p: p.lora(p.cfg.model.lora.alpha)},
    ),
    "model.lora.dropout": handling("unused", "verl sets no LoRA dropout"),
    "model.lora.target_modules": sets(
        "mapped",
        "model.target_modules",
        {
            "actor_rollout_ref.model.target_modules": lambda p: p.lora(
                p.cfg.model.lora.target_modules
            )
        },
    ),
    "model.lora.save": handling("unused", "verl writes its own checkpoints"),
    "env.id": handling("ours", _LOOP),
    "env.config": handling("ours", _LOOP),
    "env.train_split": handling("ours", "train.parquet rows: the native train seeds"),
    "env.val_split": handling("ours", "val.parquet rows: the native validation seeds"),
    "env.test_split": handling("unused", "read by ragen-train eval only"),
    "env.train": handling("refused", "one env only", "env.train=ragen/Bandit-PairsAB-v0"),
    "env.val": handling("refused", "one env only", "env.val=ragen/Bandit-PairsAB-v0"),
    "rollout.env_groups": sets("mapped", "data.train_batch_size", "data.train_batch_size"),
    "rollout.group_size": sets("mapped", "actor_rollout_ref.rollout.n", ROLLOUT + "n"),
    "rollout.max_turns": handling("ours", _LOOP),
    "rollout.max_actions_per_turn": handling("ours", _LOOP),
    "rollout.enable_think": handling("ours", _LOOP),
    "rollout.system_prompt": handling("ours", _LOOP),
    "rollout.context_mode": handling(
        "ours",
        _LOOP + "; one sequence per episode",
        "rollout.max_turns=3 rollout.context_mode=last_k",
    ),
    "rollout.context_window": handling("ours", _LOOP),
    "rollout.max_context_tokens": handling("ours", _LOOP),
    "rollout.format_penalty": handling("ours", _LOOP),
    "rollout.max_invalid_answers": handling("ours", _LOOP),
    "rollout.temperature": sets("mapped", "rollout.temperature", ROLLOUT + "temperature"),
    "rollout.top_p": sets(
        "mapped",
        "rollout.top_p and val_kwargs.top_p",
        {ROLLOUT + "top_p": None, ROLLOUT + "val_kwargs.top_p": None},
    ),
    "rollout.max_new_tokens": sets(
        "ours",
        _LOOP + "; sizes data.max_response_length",
        {"data.max_response_length": lambda p: p.max_response_length},
    ),
    "rollout.reward_placement": handling(
        "ours",
        "reward_score on the last response token (last_token)",
        "rollout.max_turns=3 rollout.context_mode=full rollout.reward_placement=turn_end",
    ),
    "rollout.batch_size": handling("unused", "verl's rollout server batches requests itself"),
    "rollout.format_reminder": handling("ours", _LOOP),
    "rollout.sampler": handling("unused", "verl's rollout server generates (rollout.name)"),
    "rollout.vllm": handling("unused", "verl configures its own rollout server"),
    "algorithm.adv_estimator": sets(
        "mapped",
        "algorithm.adv_estimator",
        {key: (lambda p, key=key: p.estimator.get(key, UNSET)) for key in VERL_ESTIMATOR_KEYS},
        "algorithm.adv_estimator=bilevel_gae",
    ),
    "algorithm.gamma": sets("mapped", "algorithm.gamma", "algorithm.gamma"),
    "algorithm.lam": sets("mapped", "algorithm.lam", "algorithm.lam"),
    "algorithm.turn_gamma": handling("unused", "bilevel_gae only, which is refused"),
    "algorithm.whiten_advantages": handling("approximate", "verl's GAE always whitens"),
    "algorithm.grpo_eps": handling("approximate", "verl's GRPO uses 1e-6"),
    "algorithm.loss_agg_mode": sets(
        "mapped", "actor.loss_agg_mode (same names)", ACTOR + "loss_agg_mode"
    ),
    "algorithm.norm_len": sets(
        "mapped",
        "actor.loss_scale_factor",
        {ACTOR + "loss_scale_factor": lambda p: p.loss_scale_factor},
    ),
    "algorithm.clip_low": sets("mapped", "actor.clip_ratio_low", ACTOR + "clip_ratio_low"),
    "algorithm.clip_high": sets("mapped", "actor.clip_ratio_high", ACTOR + "clip_ratio_high"),
    "algorithm.dual_clip": sets(
        "mapped",
        "actor.clip_ratio_c (1e9 = off)",
        {ACTOR + "clip_ratio_c": lambda p: none_or(p.cfg.algorithm.dual_clip, 1e9)},
    ),
    "algorithm.entropy_coef": sets("mapped", "actor.entropy_coeff", ACTOR + "entropy_coeff"),
    "algorithm.kl_coef": sets(
        "mapped",
        "actor.kl_loss_coef or algorithm.kl_ctrl.kl_coef",
        {
            ACTOR + "use_kl_loss": lambda p: p.kl == "loss",
            ACTOR + "kl_loss_coef": lambda p: p.kl_only("loss", p.cfg.algorithm.kl_coef),
            "algorithm.kl_ctrl.kl_coef": lambda p: p.kl_only("reward", p.cfg.algorithm.kl_coef),
        },
    ),
    "algorithm.kl_estimator": sets(
        "mapped",
        "actor.kl_loss_type or algorithm.kl_penalty",
        {
            ACTOR + "kl_loss_type": lambda p: p.kl_only("loss", p.kl_type),
            "algorithm.kl_penalty": lambda p: p.kl_only("reward", p.kl_type),
        },
    ),
    "algorithm.kl_in_reward": sets(
        "mapped",
        "algorithm.use_kl_in_reward",
        {"algorithm.use_kl_in_reward": lambda p: p.kl == "reward"},
    ),
    "algorithm.value_clip": sets(
        "mapped",
        "critic.cliprange_value",
        {CRITIC + "cliprange_value": lambda p: p.critic_only(p.cfg.algorithm.value_clip)},
    ),
    "algorithm.vf_coef": handling("approximate", "verl's critic has its own optimizer (weight 1)"),
    "algorithm.tis": handling("unused", "verl's own rollout-correction settings are not set"),
    "algorithm.tis_cap": handling("unused", "verl's own rollout-correction settings are not set"),
    "algorithm.filter.strategy": handling(
        "approximate",
        "keep-all or DAPO's zero-variance filter only",
        "algorithm.filter.strategy=top_k",
    ),
    "algorithm.filter.value": handling("approximate", "top_p 1 only", "algorithm.filter.value=0.5"),
    "algorithm.filter.metric": sets(
        "approximate",
        "reward (DAPO filter_groups on the episode return; verl 0.9.1's name)",
        {"algorithm.filter_groups.metric": lambda p: "reward" if p.dapo_filter else UNSET},
    ),
    "algorithm.filter.top_p_mode": handling("unused", "top_p < 1 is refused"),
    "algorithm.filter.eps": handling("unused", "top_p < 1 is refused"),
    "algorithm.filter.include_zero": sets(
        "approximate",
        "false: algorithm.filter_groups (refills the batch; ours shrinks it)",
        {"algorithm.filter_groups.enable": lambda p: True if p.dapo_filter else UNSET},
    ),
    "algorithm.filter.loss_scaling": handling(
        "refused", "no loss rescaling in verl", "algorithm.filter.loss_scaling=sqrt"
    ),
    "algorithm.filter.empty_stop_steps": handling("unused", "verl refills filtered batches"),
    "algorithm.filter.scope": handling("unused", "one env only"),
    "optim.lr": sets("mapped", "actor.optim.lr", ACTOR + "optim.lr"),
    "optim.critic_lr": sets(
        "mapped",
        "critic.optim.lr",
        {CRITIC + "optim.lr": lambda p: p.critic_only(p.cfg.optim.critic_lr)},
    ),
    "optim.weight_decay": sets("mapped", "actor.optim.weight_decay", ACTOR + "optim.weight_decay"),
    "optim.beta1": sets(
        "mapped",
        "actor.optim.betas[0]",
        {ACTOR + "optim.betas": lambda p: [p.cfg.optim.beta1, p.cfg.optim.beta2]},
    ),
    "optim.beta2": handling("mapped", "actor.optim.betas[1]"),
    "optim.adam_eps": handling("approximate", "torch AdamW's 1e-8"),
    "optim.grad_clip": sets(
        "mapped",
        "actor.grad_clip (1e9 = off)",
        {ACTOR + "grad_clip": lambda p: positive_or(p.cfg.optim.grad_clip, 1e9)},
    ),
    "optim.warmup_steps": sets(
        "mapped",
        "actor.optim.lr_warmup_steps",
        {ACTOR + "optim.lr_warmup_steps": lambda p: positive_or(p.cfg.optim.warmup_steps, -1)},
    ),
    "optim.lr_schedule": sets(
        "mapped",
        "actor.optim.lr_scheduler_type",
        {ACTOR + "optim.lr_scheduler_type": lambda p: p.schedule or "constant"},
        "optim.lr_schedule=linear",
    ),
    "optim.min_lr_ratio": sets(
        "mapped",
        "actor.optim.min_lr_ratio (cosine)",
        {
            ACTOR + "optim.min_lr_ratio": lambda p: (
                p.cfg.optim.min_lr_ratio if p.schedule == "cosine" else UNSET
            )
        },
    ),
    "optim.ppo_epochs": sets("mapped", "actor.ppo_epochs", ACTOR + "ppo_epochs"),
    "optim.mini_batches": sets(
        "mapped",
        "actor.ppo_mini_batch_size = env_groups / mini_batches",
        {
            ACTOR + "ppo_mini_batch_size": lambda p: max(
                1, p.cfg.rollout.env_groups // p.cfg.optim.mini_batches
            )
        },
        "optim.mini_batches=3",
    ),
    "optim.micro_batch_size": sets(
        "mapped",
        "*.ppo_micro_batch_size_per_gpu",
        {
            ACTOR + "ppo_micro_batch_size_per_gpu": _micro,
            ROLLOUT + "log_prob_micro_batch_size_per_gpu": _micro,
            "actor_rollout_ref.ref.log_prob_micro_batch_size_per_gpu": _micro,
            CRITIC + "ppo_micro_batch_size_per_gpu": lambda p: p.critic_only(
                p.cfg.optim.micro_batch_size
            ),
        },
    ),
    "sft": handling("unused", "settings of ragen-train sft, which has no back-ends"),
    "trainer.total_steps": sets(
        "mapped", "trainer.total_training_steps", "trainer.total_training_steps"
    ),
    "trainer.val_every": sets(
        "mapped",
        "trainer.test_freq",
        {"trainer.test_freq": lambda p: positive_or(p.cfg.trainer.val_every, -1)},
    ),
    "trainer.val_episodes": sets(
        "mapped", "data.val_batch_size, val.parquet rows", "data.val_batch_size"
    ),
    "trainer.val_temperature": sets(
        "mapped",
        "rollout.val_kwargs.temperature / do_sample",
        {
            ROLLOUT + "val_kwargs.temperature": None,
            ROLLOUT + "val_kwargs.do_sample": lambda p: p.cfg.trainer.val_temperature > 0,
        },
    ),
    "trainer.val_before_train": sets(
        "mapped",
        "trainer.val_before_train",
        {
            "trainer.val_before_train": lambda p: (
                p.cfg.trainer.val_before_train and p.cfg.trainer.val_every > 0
            )
        },
    ),
    "trainer.save_every": sets(
        "mapped",
        "trainer.save_freq",
        {"trainer.save_freq": lambda p: positive_or(p.cfg.trainer.save_every, -1)},
    ),
    "trainer.keep_checkpoints": sets(
        "mapped",
        "trainer.max_actor_ckpt_to_keep",
        {
            "trainer.max_actor_ckpt_to_keep": lambda p: positive_or(
                p.cfg.trainer.keep_checkpoints, None
            )
        },
    ),
    "trainer.out_dir": sets(
        "mapped",
        "trainer.default_local_dir = out_dir/verl_checkpoints",
        {"trainer.default_local_dir": lambda p: p.checkpoint_dir},
    ),
    "trainer.seed": sets(
        "mapped",
        "actor.data_loader_seed, rollout.seed",
        {ACTOR + "data_loader_seed": None, ROLLOUT + "seed": None},
    ),
    "trainer.loggers": sets(
        "mapped",
        "trainer.logger (console + wandb / tensorboard)",
        {"trainer.logger": lambda p: verl_loggers(p.cfg.trainer.loggers)},
    ),
    "trainer.wandb_project": sets("mapped", "trainer.project_name", "trainer.project_name"),
    "trainer.collapse_every": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_samples": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_samplers": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_warn": handling("unused", "collapse diagnostics are not computed"),
    "trainer.distributed": sets(
        "mapped",
        "actor.strategy = fsdp | fsdp2",
        {ACTOR + "strategy": lambda p: "fsdp2" if p.cfg.trainer.distributed == "fsdp2" else "fsdp"},
    ),
    "trainer.max_nonfinite_skips": handling("unused", _NATIVE_ONLY),
    "trainer.degenerate_warn_rate": handling("unused", _NATIVE_ONLY),
    "trainer.degenerate_stop_steps": handling("unused", _NATIVE_ONLY),
    "trainer.overwrite": handling("unused", _NATIVE_ONLY),
    "trainer.dist_timeout_s": handling("unused", "ray and verl set their own timeouts"),
    "trainer.allocator": handling(
        "approximate",
        "ragen-train restarts with it preloaded; processes it starts inherit LD_PRELOAD",
    ),
    "trainer.update_path": handling("unused", "verl computes its own log-probs"),
    "trainer.max_tokens_per_microbatch": handling(
        "unused", "verl's counterpart is use_dynamic_bsz / ppo_max_token_len_per_gpu, not mapped"
    ),
}


@dataclass
class VerlSettings:
    """Hydra overrides for ``verl.trainer.main_ppo`` and the notes on every setting."""

    overrides: list[str]
    notes: list[MappingNote]

    def as_dict(self) -> dict[str, str]:
        return dict(o.lstrip("+").split("=", 1) for o in self.overrides)


def _fmt(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if v is None:
        return "null"
    if isinstance(v, (list, tuple)):
        return "[" + ",".join(_fmt(x) for x in v) + "]"
    return str(v)


@dataclass(frozen=True)
class VerlPlan:
    """What the :data:`VERL_FIELDS` producers read: the config and the values derived once."""

    cfg: StarPOConfig
    critic: bool  # the estimator needs a critic (verl's critic worker is configured)
    estimator: dict[str, Any]  # the estimator's verl overrides ({} when it has none)
    model_path: str
    max_response_length: int
    loss_scale_factor: Any  # the *-norm length, or UNSET for other aggregations
    kl: str | None  # where the KL term goes: "loss", "reward", or None (kl_coef == 0)
    kl_type: str  # verl's name of our KL estimator
    dapo_filter: bool  # keep every group but the zero-variance ones (DAPO's filter_groups)
    schedule: str | None  # verl's name of our LR schedule, None without one
    checkpoint_dir: str

    def lora(self, value: Any) -> Any:
        """``value`` when LoRA is on (``model.lora.rank > 0``), else :data:`UNSET`."""
        return value if self.cfg.model.lora.rank > 0 else UNSET

    def kl_only(self, where: str, value: Any) -> Any:
        """``value`` when the KL term goes ``where`` (``"loss"`` / ``"reward"``), else :data:`UNSET`."""
        return value if self.kl == where else UNSET

    def critic_only(self, value: Any) -> Any:
        """``value`` when there is a critic and ``value`` is set, else :data:`UNSET`."""
        return value if self.critic and value is not None else UNSET


def verl_response_length(max_turns: int, max_new_tokens: int) -> int:
    """Default ``data.max_response_length``: room for every turn's completion and the
    observation between turns, ``max_turns · (max_new_tokens + 256)`` tokens
    (5 turns of 100 tokens: 1,780)."""
    return max_turns * (max_new_tokens + 256)


def verl_settings(
    cfg: StarPOConfig,
    *,
    train_files: str,
    val_files: str,
    agent_loop_config: str,
    n_gpus_per_node: int = 8,
    nnodes: int = 1,
    rollout_name: str = "vllm",
    tensor_parallel_size: int = 1,
    max_prompt_length: int = 1024,
    max_response_length: int | None = None,
    checkpoint_dir: str | None = None,
) -> VerlSettings:
    """Map ``cfg`` onto verl's PPO trainer config (verl's key names as of verl-project/verl main, 2026).

    The overrides are :data:`VERL_FIELDS` walked over a :class:`VerlPlan`
    (:func:`~ragen_train.backends.field_map.settings_from_table`), then :data:`VERL_FIXED`
    and the launch arguments.  ``max_response_length`` must hold a whole multi-turn
    response (every turn's completion plus the observation tokens between turns); default
    :func:`verl_response_length`.

    Raises:
        TrainConfigError: a setting verl cannot express has a non-default value (all named).
    """
    from ragen_bench.policies.hf import resolve_model_path
    from ragen_bench.rollout import rollout_config

    r, alg, opt, t = cfg.rollout, cfg.algorithm, cfg.optim, cfg.trainer
    rcfg = rollout_config(cfg.env.id, cfg.rollout)
    require_one_row_per_episode(cfg, rcfg, "verl")
    notes: list[MappingNote] = []
    add = lambda f, s, d: notes.append(MappingNote(f, s, d))  # noqa: E731

    est = ADVANTAGE_ESTIMATORS.entry(alg.adv_estimator)
    critic = est.meta["needs_critic"]
    verl_est = est.meta["verl"]  # verl's overrides selecting the same estimator, or None
    if verl_est is not None:
        add(
            "algorithm.adv_estimator",
            "mapped",
            f"{est.name} -> "
            + ", ".join(f"{k.split('.')[-1]}={v}" for k, v in verl_est.items())
            + (" (critic enabled)" if critic else ""),
        )
    else:
        add("algorithm.adv_estimator", "unsupported", est.meta["verl_why"])
    add("algorithm.gamma/lam", "mapped", "algorithm.gamma, algorithm.lam")
    add(
        "algorithm.grpo_eps",
        "mapped" if alg.grpo_eps == 1e-6 else "approximate",
        "verl's GRPO uses epsilon 1e-6",
    )
    add(
        "algorithm.whiten_advantages",
        "mapped" if alg.whiten_advantages or not critic else "approximate",
        "verl's GAE always whitens the advantages",
    )
    norm = loss_normaliser(alg.norm_len, r.max_new_tokens, rcfg.max_turns)
    scale_factor = AGG_MODES.meta(alg.loss_agg_mode, "verl_scale_factor")
    add(
        "algorithm.loss_agg_mode",
        "mapped",
        f"actor.loss_agg_mode={alg.loss_agg_mode} (same names)"
        + (f", loss_scale_factor={norm:g}" if scale_factor else ""),
    )
    add(
        "algorithm.clip_low/clip_high/dual_clip",
        "mapped",
        "actor.clip_ratio_low/high, clip_ratio_c (1e9 = off)",
    )
    add("algorithm.entropy_coef", "mapped", "actor.entropy_coeff")
    add(
        "algorithm.kl_*",
        "mapped",
        "actor.use_kl_loss/kl_loss_coef/kl_loss_type or algorithm.use_kl_in_reward/"
        "kl_ctrl.kl_coef/kl_penalty ("
        + ", ".join(f"{n}={KL_ESTIMATORS.meta(n, 'verl')}" for n in KL_ESTIMATORS)
        + ")",
    )
    if critic:
        add(
            "algorithm.value_clip / optim.critic_lr",
            "mapped",
            "critic.cliprange_value, critic.optim.lr",
        )
        add(
            "algorithm.vf_coef",
            "approximate",
            "verl's critic has its own optimizer; the value-loss weight is 1",
        )
    f = alg.filter
    keep_all = f.strategy == "top_p" and f.value >= 1.0
    if keep_all and f.include_zero:
        add("algorithm.filter", "mapped", "all groups kept")
    elif keep_all:
        # verl 0.9.1 (trainer/ppo/v1/replay_buffer.py, FILTER_GROUPS_REWARD_METRIC): "reward" is
        # the canonical reward, our reward_score; "seq_final_reward" is not a name it knows
        add(
            "algorithm.filter",
            "approximate",
            "include_zero=false -> algorithm.filter_groups (DAPO dynamic sampling): "
            "zero-variance groups are dropped and the batch is refilled by generating more, ours shrinks the batch",
        )
    else:
        add(
            "algorithm.filter.strategy" if f.strategy != "top_p" else "algorithm.filter.value",
            "unsupported",
            f"{f.strategy} {f.value} filtering has no verl counterpart "
            "(only DAPO's zero-variance group filter); run with algorithm.filter.value=1 "
            "(keep every group), plus algorithm.filter.include_zero=false for DAPO's filter",
        )
    if f.loss_scaling != "none":
        add(
            "algorithm.filter.loss_scaling",
            "unsupported",
            "no loss rescaling by the kept fraction in verl",
        )
    verl_schedule = LR_SCHEDULES.meta(opt.lr_schedule, "verl")
    if verl_schedule is None:
        add(
            "optim.lr_schedule",
            "unsupported",
            f"{opt.lr_schedule}: verl's actor schedules are constant and cosine",
        )
    add("optim.*", "mapped", "actor.optim.lr/weight_decay/betas/lr_warmup_steps, actor.grad_clip")
    add(
        "optim.adam_eps",
        "mapped" if opt.adam_eps == 1e-8 else "approximate",
        "torch AdamW default eps 1e-8",
    )
    if r.env_groups % opt.mini_batches:
        add(
            "optim.mini_batches",
            "unsupported",
            f"env_groups={r.env_groups} must divide by mini_batches",
        )
    add(
        "optim.ppo_epochs/mini_batches/micro_batch_size",
        "mapped",
        "actor.ppo_epochs, ppo_mini_batch_size (groups per optimizer step), ppo_micro_batch_size_per_gpu",
    )
    add("trainer.distributed", "mapped", "actor.strategy=fsdp|fsdp2")
    add(
        "rollout.*",
        "mapped",
        "played by RagenAgentLoop with our rollout engine; rollout.n=group_size, "
        "data.train_batch_size=env_groups, temperature/top_p, val_kwargs from trainer.val_temperature",
    )
    add(
        "model.*",
        "mapped",
        "actor_rollout_ref.model.path / lora_rank / lora_alpha / target_modules",
    )
    add(
        "trainer.*",
        "mapped",
        "total_training_steps, test_freq, save_freq, val_before_train, logger, checkpoints",
    )
    add(
        "trainer.collapse_every",
        "approximate",
        "collapse diagnostics are not computed by this back-end",
    )
    add(
        "rollout.reward_placement",
        "mapped",
        "reward_score goes on the last response token (last_token)",
    )

    bad = [n for n in notes if n.status == "unsupported"]
    if bad:
        raise TrainConfigError(
            bad[0].field, "cannot run on verl: " + "; ".join(f"{n.field}: {n.detail}" for n in bad)
        )
    kl_on = alg.kl_coef > 0
    plan = VerlPlan(
        cfg=cfg,
        critic=critic,
        estimator=dict(verl_est or {}),
        model_path=resolve_model_path(cfg.model.path),
        max_response_length=max_response_length
        or verl_response_length(rcfg.max_turns, r.max_new_tokens),
        loss_scale_factor=norm if scale_factor else UNSET,
        kl=("reward" if alg.kl_in_reward else "loss") if kl_on else None,
        kl_type=KL_ESTIMATORS.meta(alg.kl_estimator, "verl"),
        dapo_filter=keep_all and not f.include_zero,
        schedule=verl_schedule,
        checkpoint_dir=checkpoint_dir or str(Path(t.out_dir) / "verl_checkpoints"),
    )
    launch = (
        ("data.train_files", train_files),
        ("data.val_files", val_files),
        ("data.max_prompt_length", max_prompt_length),
        (ROLLOUT + "name", rollout_name),
        (ROLLOUT + "tensor_model_parallel_size", tensor_parallel_size),
        (ROLLOUT + "agent.agent_loop_config_path", agent_loop_config),
        ("trainer.n_gpus_per_node", n_gpus_per_node),
        ("trainer.nnodes", nnodes),
    )
    hydra = settings_from_table(VERL_FIELDS, plan, VERL_FIXED + launch)
    return VerlSettings(overrides=[f"{k}={_fmt(v)}" for k, v in hydra.items()], notes=notes)


#: verl overrides that no config field or launch argument changes: our dataset rows are in
#: step order and hold the chat, our agent loop plays them with verl's async rollout server.
VERL_FIXED: tuple[tuple[str, Any], ...] = (
    ("data.shuffle", False),
    ("data.validation_shuffle", False),
    ("data.return_raw_chat", True),
    ("data.filter_overlong_prompts", False),
    (ROLLOUT + "mode", "async"),
    (ROLLOUT + "top_k", -1),
    (ROLLOUT + "calculate_log_probs", True),
    (ROLLOUT + "val_kwargs.n", 1),
    (ROLLOUT + "agent.default_agent_loop", AGENT_NAME),
)


# ---------------------------------------------------------------- dataset
def dataset_rows(cfg: StarPOConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """verl dataset rows (module docstring): ``(train rows, validation rows)``."""
    r, t = cfg.rollout, cfg.trainer

    def row(
        index: int, seed: int, split: str, group: int, step: int | None, phase: str
    ) -> dict[str, Any]:
        return {
            "data_source": cfg.env.id,
            "prompt": [{"role": "user", "content": f"ragen:{cfg.env.id}:{split}:seed={seed}"}],
            "agent_name": AGENT_NAME,
            "ability": "agent",
            "reward_model": {"style": "rule", "ground_truth": ""},
            "extra_info": {
                "index": index,
                "ragen_seed": seed,
                "ragen_split": split,
                "ragen_group": group,
                "ragen_step": -1 if step is None else step,
                "ragen_phase": phase,
            },
        }

    train = [
        row(k * r.env_groups + g, k * r.env_groups + g, cfg.env.train_split, g, k, "train")
        for k in range(t.total_steps)
        for g in range(r.env_groups)
    ]
    val = [row(i, i, cfg.env.val_split, i, None, "val") for i in range(t.val_episodes)]
    return train, val


@dataclass
class VerlLaunch:
    """The prepared files of a verl run."""

    directory: Path
    settings: VerlSettings
    command: str
    files: dict[str, Path] = field(default_factory=dict)


def write_verl_inputs(
    cfg: StarPOConfig, directory: str | Path | None = None, **launch: Any
) -> VerlLaunch:
    """Write the datasets, the agent-loop YAML, the overrides and ``launch.sh``.

    Args:
        directory: where (default ``<out_dir>/verl``).
        launch: forwarded to :func:`verl_settings` (``n_gpus_per_node``, ``nnodes``,
            ``rollout_name``, ``tensor_parallel_size``, ``max_prompt_length``,
            ``max_response_length``).

    Raises:
        ImportError: pyarrow is missing (parquet).  TrainConfigError: see :func:`verl_settings`.
    """
    try:
        import pyarrow as pa
        import pyarrow.parquet as pq
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "writing verl's parquet datasets needs pyarrow: pip install pyarrow"
        ) from exc
    d = Path(directory or Path(cfg.trainer.out_dir) / "verl").resolve()
    d.mkdir(parents=True, exist_ok=True)
    files = {
        "train": d / "train.parquet",
        "val": d / "val.parquet",
        "agent_loop": d / "agent_loop.yaml",
        "overrides": d / "overrides.txt",
        "launch": d / "launch.sh",
        "config": d / "config.json",
    }
    settings = verl_settings(
        cfg,
        train_files=str(files["train"]),
        val_files=str(files["val"]),
        agent_loop_config=str(files["agent_loop"]),
        **launch,
    )
    train, val = dataset_rows(cfg)
    pq.write_table(pa.Table.from_pylist(train), files["train"])
    pq.write_table(pa.Table.from_pylist(val), files["val"])
    loop = RagenLoopSettings.from_config(cfg, episode_log=str(d / "episode_log"))
    files["agent_loop"].write_text(
        f"- name: {AGENT_NAME}\n  _target_: ragen_train.backends.verl_agent_loop.RagenAgentLoop\n"
        f"  ragen_settings: {json.dumps(loop.to_json())}\n",
        encoding="utf-8",
    )
    files["overrides"].write_text("\n".join(settings.overrides) + "\n", encoding="utf-8")
    files["config"].write_text(jsonutil.dumps(cfg.to_dict(), indent=2) + "\n", encoding="utf-8")
    command = "python3 -m verl.trainer.main_ppo " + " ".join(
        shlex.quote(x) for x in settings.overrides
    )
    quoted = []  # in launch.sh the cluster shape can be changed with environment variables
    for x in settings.overrides:
        key, value = x.split("=", 1)
        var = LAUNCH_ENV.get(key)
        quoted.append(f'{key}="${{{var}:-{value}}}"' if var else shlex.quote(x))
    files["launch"].write_text(
        "#!/usr/bin/env bash\n# ragen -> verl (generated by ragen_train.backends.verl_backend)\n"
        "set -euo pipefail\npython3 -m verl.trainer.main_ppo \\\n  "
        + " \\\n  ".join(quoted)
        + ' \\\n  "$@"\n',
        encoding="utf-8",
    )
    files["launch"].chmod(0o755)
    return VerlLaunch(directory=d, settings=settings, command=command, files=files)


# ---------------------------------------------------------------- metrics
@dataclass
class _Episode:
    """An episode log line with the interface :func:`ragen_train.metrics.episode_metrics` reads."""

    group: int
    status: str
    success: bool
    episode_return: float
    values: dict[str, float]

    def metrics(self) -> dict[str, float]:
        return self.values


def metrics_from_episode_log(
    lines: Iterable[dict[str, Any]], cfg: StarPOConfig
) -> list[tuple[int, str, dict[str, float]]]:
    """``(step, phase, metrics)`` rows from the agent loop's episode log.

    Training lines are grouped by their dataset step (``step + 1`` in the native
    numbering); validation lines by round (the ``i``-th time a seed is seen), round ``i``
    being logged at step ``i · val_every`` when ``val_before_train`` else
    ``(i + 1) · val_every`` (capped at ``total_steps``).
    """
    from ..metrics import episode_metrics

    t = cfg.trainer
    train: dict[int, list[_Episode]] = defaultdict(list)
    val: dict[int, list[_Episode]] = defaultdict(list)
    seen: dict[int, int] = defaultdict(int)
    for ln in lines:
        ep = _Episode(
            int(ln["group"]),
            str(ln["status"]),
            bool(ln["success"]),
            float(ln["return"]),
            {k: float(v) for k, v in ln["metrics"].items()},
        )
        if ln.get("phase") == "val":
            rnd = seen[int(ln["seed"])]
            seen[int(ln["seed"])] += 1
            val[rnd].append(ep)
        else:
            train[int(ln["step"])].append(ep)
    rows: list[tuple[int, str, dict[str, float]]] = []
    for k in sorted(train):
        rows.append((k + 1, "train", episode_metrics(train[k], "train", cfg.rollout.group_size)))  # type: ignore[arg-type]
    first = 0 if t.val_before_train else 1
    for rnd in sorted(val):
        step = min((rnd + first) * max(t.val_every, 1), t.total_steps)
        rows.append((step, "val", episode_metrics(val[rnd], "val")))  # type: ignore[arg-type]
    return sorted(rows, key=lambda x: (x[0], x[1] == "val"))


#: Where verl 0.9.1 stops on a machine without accelerators (``verl/single_controller/ray/base.py``,
#: ``ResourcePoolManager._check_resource_available``), after Ray, TransferQueue, the tokenizer and
#: the datasets are up: verl has no CPU platform (``verl/plugin/platform``: nvidia, huawei, amd).
VERL_NO_GPU_STOP = "Total available GPUs {available} is less than total desired GPUs {desired}"


def visible_accelerators() -> int:
    """The CUDA/ROCm (or Ascend NPU) devices torch sees on this machine (0 on CPU-only ones)."""
    import torch

    if torch.cuda.is_available():
        return torch.cuda.device_count()
    npu = getattr(torch, "npu", None)
    return npu.device_count() if npu is not None and npu.is_available() else 0


def gpu_shortfall(settings: VerlSettings, env: dict[str, str] | None = None) -> str | None:
    """Why verl cannot start here, said before Ray starts; ``None`` when it can (or cannot be told).

    A one-node run (``trainer.nnodes=1``, no ``RAY_ADDRESS``: verl starts a local Ray
    cluster) needs ``trainer.n_gpus_per_node`` devices on this machine (``launch.sh`` takes
    ``RAGEN_VERL_GPUS_PER_NODE`` / ``RAGEN_VERL_NNODES`` first, so they are read here too).
    Multi-node runs place their workers on other machines, so nothing is checked.
    """
    env = dict(os.environ if env is None else env)
    o = settings.as_dict()
    nnodes = int(env.get(LAUNCH_ENV["trainer.nnodes"]) or o["trainer.nnodes"])
    desired = int(env.get(LAUNCH_ENV["trainer.n_gpus_per_node"]) or o["trainer.n_gpus_per_node"])
    if nnodes != 1 or env.get("RAY_ADDRESS"):
        return None
    available = visible_accelerators()
    if available >= desired:
        return None
    return (
        f"verl needs {desired} GPU(s) on this machine (trainer.n_gpus_per_node, "
        f"{LAUNCH_ENV['trainer.n_gpus_per_node']}) and torch sees {available}; "
        + (
            "verl 0.9.1 has no CPU platform (nvidia, huawei and amd only), so after starting "
            "Ray it would stop with '" + VERL_NO_GPU_STOP.format(available=0, desired=desired) + "'"
            if available == 0
            else f"set {LAUNCH_ENV['trainer.n_gpus_per_node']}={available} to use them"
        )
    )


class VerlBackend:
    """Prepare (always) and launch (where verl is installed) a verl run."""

    name = "verl"

    def train(
        self, cfg: StarPOConfig, *, model: Any = None, tokenizer: Any = None, **launch: Any
    ) -> BackendResult:
        """Write the launch files to ``<out_dir>/verl``, run ``launch.sh``, convert the episode log.

        ``launch.sh`` runs with this interpreter's ``bin`` folder first on ``PATH``, so its
        ``python3`` is the one that imported verl (a venv used without activating it).

        Raises:
            ImportError: verl is not installed (the files are written first; the message
                says where).
            TrainConfigError: (``--trainer``) a one-node run asks for more GPUs than this
                machine has (:func:`gpu_shortfall`), said before Ray starts.
            subprocess.CalledProcessError: verl failed.
        """
        import subprocess

        if model is not None:
            raise ValueError(
                "the verl back-end loads the model itself from model.path (save a warm-started model first)"
            )
        prepared = write_verl_inputs(cfg, **launch)
        try:
            import verl  # noqa: F401
        except ImportError as exc:
            raise ImportError(
                f"the verl back-end needs verl (verl-project/verl) with ray and vLLM/SGLang on GPU "
                f"machines; the launch files are ready in {prepared.directory} "
                f"(run {prepared.files['launch']} where verl is installed)"
            ) from exc
        short = gpu_shortfall(prepared.settings)
        if short:
            raise TrainConfigError(
                "--trainer", f"{short}. The launch files are ready in {prepared.directory}"
            )
        env = dict(os.environ)
        env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
        subprocess.run(
            ["bash", str(prepared.files["launch"])],
            check=True,
            stdout=sys.stdout,
            stderr=sys.stderr,
            env=env,
        )
        from ..logger import MetricLogger

        out = Path(cfg.trainer.out_dir)
        lines = []
        for p in sorted((prepared.directory / "episode_log").glob("*.jsonl")):
            lines += [json.loads(x) for x in p.read_text().splitlines() if x.strip()]
        logger = MetricLogger(out, ["jsonl"])
        last_val: dict[str, float] = {}
        for step, phase, metrics in metrics_from_episode_log(lines, cfg):
            logger.log(step, metrics, phase=phase)
            if phase == "val":
                last_val = metrics
        logger.close()
        return BackendResult(
            backend=self.name,
            out_dir=out,
            metrics_path=out / "metrics.jsonl",
            checkpoint_dir=None,
            last_val=last_val,
            extra={
                "launch": prepared.command,
                "to_hf": "python -m verl.model_merger merge --backend fsdp --local_dir "
                f"{out / 'verl_checkpoints'}/global_step_<N>/actor --target_dir <HF dir>",
            },
        )
