"""Training configuration: dataclasses, presets, ``key=value`` overrides.

A config is a :class:`StarPOConfig` (nested dataclasses).  It comes from a preset
(:mod:`ragen_train.presets`) or a JSON/YAML file, then ``key=value`` overrides with
dotted paths (``algorithm.adv_estimator=gae optim.lr=1e-5``) are applied; every value
is type-checked against the dataclass field and a wrong or unknown key raises
:class:`TrainConfigError` naming the field.

Each field is declared once, with :func:`~ragen_train.fields.setting` (help, default, range,
choices); :data:`FIELD_SPECS` reads the declarations back and everything else derives from
them: :func:`validate`, :func:`config_json_schema` (the JSON Schema of the saved
``config.json``, checked in as ``schemas/train_config.schema.json``), :func:`explain_fields`
(``ragen-train show-config --explain``) and ``docs/config-reference.md``.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_bench.rollout import (
    CONTEXT_MODES,
    SYSTEM_PROMPTS,
    RolloutConfig,
    rollout_config,
)
from ragen_bench.types import SamplingParams
from ragen_envs.jsonutil import NestingTooDeep, check_depth
from ragen_envs.ranges import Range

from .advantages import ADVANTAGE_ESTIMATORS
from .errors import TrainConfigError
from .fields import field_specs, json_schema, setting
from .filtering import FilterConfig
from .losses import AGG_MODES, KL_ESTIMATORS
from .multienv import TrainEnv, ValEnv
from .schedules import LR_SCHEDULES

_DTYPES = ("float32", "bfloat16", "float16")
_SPLITS = ("train", "validation", "test")


@dataclass
class LoraConfig:
    """LoRA adapters via peft (``rank > 0`` enables them; Hu et al. 2021, arXiv 2106.09685)."""

    rank: int = setting(
        0,
        "LoRA rank r of the adapter matrices; 0 trains every weight (no LoRA).",
        range=Range(ge=0),
    )
    alpha: int = setting(
        16,
        "LoRA scaling alpha (the update is scaled by alpha / rank; peft's lora_alpha).",
        range=Range(gt=0),
    )
    dropout: float = setting(
        0.0, "Dropout probability on the LoRA input (peft's lora_dropout).", range=Range(ge=0, lt=1)
    )
    target_modules: str = setting(
        "all-linear",
        "Modules that get adapters: peft's 'all-linear' or a comma-separated list of module names.",
    )
    save: str = setting(
        "adapter",
        "What final_model holds: the LoRA adapter alone, or the base weights with it merged in.",
        choices=("adapter", "merged"),
    )


@dataclass
class ModelConfig:
    """The policy model.

    ``path`` is a model directory, a hub id, or ``"tiny"`` (built offline).
    """

    path: str = setting(
        "tiny",
        "Policy model: a local directory, a Hugging Face hub id, or 'tiny' (a small random "
        "model built offline for tests).",
    )
    dtype: str = setting(
        "float32", "Precision of the trained weights and the forward pass.", choices=_DTYPES
    )
    device: str = setting(
        "cpu",
        "Torch device of the policy ('cpu', 'cuda'; under torchrun each rank takes its own GPU).",
    )
    gradient_checkpointing: bool = setting(
        False,
        "Recompute activations during the backward pass: less memory for one more forward pass.",
    )
    lora: LoraConfig = field(default_factory=LoraConfig)
    mixed_precision: str = setting(
        "none",
        "bf16: float32 master weights and optimizer state, bfloat16 compute (FSDP2 policy or autocast); needs model.dtype=float32.",
        choices=("none", "bf16"),
    )


@dataclass
class EnvSection:
    """The training environment: an id, config overrides, train/validation splits.

    ``train`` / ``val``: several envs at once (:mod:`ragen_train.multienv`; empty = the one
    env ``id`` with ``config``, which SFT and ``ragen-train eval`` use in any case).
    """

    id: str = setting(
        "ragen/Bandit-v0",
        "Registered env id that training, validation and SFT play (ragen/<Name>-v<N>).",
    )
    config: dict[str, Any] = setting(
        factory=dict,
        help="Env config overrides, checked against the env's config schema (schemas/envs/).",
    )
    train_split: str = setting(
        "train", "Data split (or seed stream) training episodes are drawn from.", choices=_SPLITS
    )
    val_split: str = setting(
        "validation", "Split the validation rounds (trainer.val_every) play.", choices=_SPLITS
    )
    test_split: str = setting(
        "test",
        "Split of the before/after test evaluation (quickstart pipeline) and of ragen-train eval.",
        choices=_SPLITS,
    )
    train: list[TrainEnv] = setting(
        factory=list,
        help="Several training envs at once, groups shared by weight (id:weight,...); empty = env.id.",
    )
    val: list[ValEnv] = setting(
        factory=list,
        help="Several validation envs, each reported under its tag (id:episodes,...); empty = env.id.",
    )


@dataclass
class VLLMSection:
    """The colocated vLLM rollout engine (``rollout.sampler=vllm``; see
    :mod:`ragen_train.rollout_engine`).  ``dtype`` ``auto``: bfloat16 on GPUs and on CPUs with
    native bf16 (AVX512_BF16 / AMX), float32 on other CPUs (``rollout_engine.engine_dtype``)."""

    dtype: str = setting(
        "auto",
        "vLLM engine weight dtype; auto = bfloat16 on GPUs and CPUs with native bf16, float32 on other CPUs.",
        choices=("auto", *_DTYPES),
    )
    gpu_memory_utilization: float = setting(
        0.5,
        "Share of GPU memory vLLM may take for weights and KV cache (vLLM's gpu_memory_utilization).",
        range=Range(gt=0, le=1),
    )
    tensor_parallel_size: int = setting(
        1,
        "GPUs one vLLM engine shards the model over (vLLM's tensor_parallel_size).",
        range=Range(ge=1),
    )
    max_model_len: int | None = setting(
        None, "Longest prompt plus response vLLM accepts, in tokens; null = the model's maximum."
    )
    kv_cache_gb: float = setting(
        2.0,
        "CPU only: KV cache size in GiB (VLLM_CPU_KVCACHE_SPACE, unless already set).",
        range=Range(gt=0),
    )
    sleep_mode: bool = setting(
        True,
        "GPU only: free the engine's KV cache and weights during the update (vLLM sleep mode).",
    )
    enforce_eager: bool = setting(
        True, "Run vLLM without CUDA graphs: slower decoding, faster start-up and less memory."
    )
    check_sync: bool = setting(
        True, "After every weight sync, compare one weight of the engine with the trained model."
    )


# The agent-loop protocol fields of ``rollout`` (:data:`ragen_bench.rollout.PROTOCOL_FIELDS`) *are* those of the
# bench's :class:`~ragen_bench.rollout.RolloutConfig`: same names, same defaults (read from it),
# except that the per-env budgets (``max_turns``, ``max_actions_per_turn``) default to
# ``None`` = the env's ``agent_defaults``; :func:`rollout_config_for` passes exactly these.


@dataclass
class RolloutSection:
    """Rollouts per step and the agent-loop protocol (``None`` = the env's default).

    The protocol fields (:data:`ragen_bench.rollout.PROTOCOL_FIELDS`) are :class:`~ragen_bench.rollout.RolloutConfig`'s
    and take their defaults from it; ``temperature`` and ``top_p`` are
    :class:`~ragen_bench.types.SamplingParams`'s.

    ``sampler``: who samples the rollouts — ``hf`` (transformers ``generate`` on the training
    model), ``vllm`` (a colocated vLLM engine synced after every optimizer step) or
    ``auto`` (``vllm`` when vLLM is installed and the model is not ``tiny``).
    """

    env_groups: int = setting(
        8,
        "Prompt groups per step: distinct env seeds (RAGEN es_manager.train.env_groups 8).",
        range=Range(ge=1),
    )
    group_size: int = setting(
        8,
        "Episodes per group, all on the group's seed (RAGEN group_size; GRPO needs >= 2).",
        range=Range(ge=1),
    )
    max_turns: int | None = setting(
        None,
        "Turns (policy calls) per episode; null = the env's agent_defaults.",
        range=Range(ge=1),
    )
    max_actions_per_turn: int | None = setting(
        None,
        "Actions executed per turn, extra ones dropped; null = the env's agent_defaults.",
        range=Range(ge=1),
    )
    enable_think: bool = setting(
        RolloutConfig.enable_think,
        "Ask for <think>...</think><answer>...</answer> (true) or <answer> only (false).",
    )
    system_prompt: str = setting(
        RolloutConfig.system_prompt,
        "System message: the env's instructions and the protocol (full), or the answer format only.",
        choices=SYSTEM_PROMPTS,
    )
    context_mode: str = setting(
        RolloutConfig.context_mode,
        "History each turn's prompt shows: every turn, the last context_window, or none.",
        choices=CONTEXT_MODES,
    )
    context_window: int = setting(
        RolloutConfig.context_window,
        "Earlier turns shown in last_k context mode.",
        range=Range(ge=0),
    )
    max_context_tokens: int | None = setting(
        RolloutConfig.max_context_tokens,
        "Prompt budget in tokens, oldest turns dropped first; null = no budget.",
        range=Range(ge=1),
    )
    format_penalty: float = setting(
        RolloutConfig.format_penalty,
        "Reward added to a turn whose answer does not parse (RAGEN es_manager.format_penalty -0.1).",
    )
    max_invalid_answers: int | None = setting(
        RolloutConfig.max_invalid_answers,
        "Consecutive invalid answers that end an episode; null = never for that reason.",
        range=Range(ge=1),
    )
    temperature: float = setting(
        SamplingParams.temperature,
        "Sampling temperature of training rollouts (RAGEN rollout.temperature 1; must be > 0).",
        range=Range(gt=0),
    )
    top_p: float = setting(
        SamplingParams.top_p,
        "Nucleus sampling mass of training rollouts (1 = off).",
        range=Range(gt=0, le=1),
    )
    max_new_tokens: int = setting(
        64,
        "Most tokens generated per turn (the bench's default is 256; training responses are short).",
        range=Range(ge=1),
    )
    reward_placement: str = setting(
        "last_token",
        "Where rewards sit in the token sequence: the episode return on the last token, or each "
        "turn's reward on that turn's end.",
        choices=("last_token", "turn_end"),
    )
    batch_size: int = setting(
        64, "Most episodes generated in one batched forward pass (hf engine).", range=Range(ge=1)
    )
    format_reminder: bool = setting(
        RolloutConfig.format_reminder,
        "Restate the answer format at the end of every user message (helps small instruct models).",
    )
    sampler: str = setting(
        "auto",
        "Who samples rollouts: transformers generate (hf), a colocated vLLM engine, or auto "
        "(vllm when installed and the model is not tiny).",
        choices=("auto", "hf", "vllm"),
    )
    vllm: VLLMSection = field(default_factory=VLLMSection)


#: The ``algorithm.filter`` section *is* the filter's own settings (one definition).
FilterSection = FilterConfig


@dataclass
class AlgorithmSection:
    """Advantage estimation and losses (RAGEN base.yaml defaults where they exist)."""

    adv_estimator: str = setting(
        "grpo",
        "Advantage estimator (ragen_train.advantages); gae and bilevel_gae train a critic.",
        choices=ADVANTAGE_ESTIMATORS,
    )
    gamma: float = setting(
        1.0,
        "Token-level discount factor of GAE (RAGEN base.yaml algorithm.gamma 1).",
        range=Range(ge=0, le=1),
    )
    lam: float = setting(
        1.0,
        "GAE lambda (Schulman et al. 2016, arXiv 1506.02438; RAGEN base.yaml 1).",
        range=Range(ge=0, le=1),
    )
    turn_gamma: float = setting(
        0.95,
        "Turn-level discount of bilevel_gae (RAGEN base.yaml high_level_gamma 0.95).",
        range=Range(ge=0, le=1),
    )
    whiten_advantages: bool = setting(
        True, "Whiten critic-based advantages over the batch (masked mean 0, variance 1)."
    )
    grpo_eps: float = setting(
        1e-6,
        "Added to the group std in GRPO's normalisation (A = (r - mean) / (std + eps)).",
        range=Range(gt=0),
    )
    loss_agg_mode: str = setting(
        "token-mean",
        "How token losses are averaged into one number (verl's loss_agg_mode names; ragen_train.losses).",
        choices=AGG_MODES,
    )
    norm_len: int | None = setting(
        None,
        "T_norm of seq-mean-token-sum-norm (Dr. GRPO); null = max_new_tokens * max_turns.",
        range=Range(ge=1),
    )
    # PPO ratio clip [1 - clip_low, 1 + clip_high] (Schulman et al. 2017, eq. 7; DAPO's clip-higher).
    clip_low: float = setting(
        0.2,
        "PPO ratio clip below: ratio >= 1 - clip_low (Schulman et al. 2017 eq. 7; RAGEN 0.2).",
        range=Range(ge=0, le=1),
    )
    clip_high: float = setting(
        0.28,
        "PPO ratio clip above: ratio <= 1 + clip_high (DAPO clip-higher, arXiv 2503.14476; RAGEN 0.28).",
        range=Range(ge=0),
    )
    dual_clip: float | None = setting(
        3.0,
        "Dual-clip PPO bound c on negative-advantage losses (Ye et al. 2020, arXiv 1912.09729); null = off.",
        range=Range(gt=1),
    )
    entropy_coef: float = setting(
        0.001,
        "Weight of the entropy bonus in the policy loss (RAGEN base.yaml entropy_coeff 0.001).",
        range=Range(ge=0),
    )
    kl_coef: float = setting(
        0.0,
        "Weight of the KL penalty to the reference policy; 0 = no reference model (RAGEN default 0).",
        range=Range(ge=0),
    )
    kl_estimator: str = setting(
        "k3",
        "KL estimator (Schulman 2020, 'Approximating KL divergence'): k1, k2, k3 or abs.",
        choices=KL_ESTIMATORS,
    )
    kl_in_reward: bool = setting(
        False, "Subtract the KL penalty from the token rewards instead of adding it to the loss."
    )
    value_clip: float | None = setting(
        0.5,
        "Clip range of the critic's value loss (verl critic cliprange_value 0.5); null = off.",
        range=Range(gt=0),
    )
    vf_coef: float = setting(
        1.0, "Weight of the critic's value loss in the total loss.", range=Range(ge=0)
    )
    # Truncated importance sampling for the rollout/train mismatch (Yao et al. 2025, "Your
    # Efficient RL Framework Secretly Brings You Off-Policy RL Training"; verl's
    # tis_imp_ratio_cap): "auto" = on with the vllm engine.
    tis: str = setting(
        "auto",
        "Truncated importance sampling for the rollout/trainer mismatch (Yao et al. 2025); "
        "auto = on with the vllm engine.",
        choices=("auto", "on", "off"),
    )
    tis_cap: float = setting(
        2.0,
        "Largest importance weight truncated IS keeps (verl's tis_imp_ratio_cap).",
        range=Range(ge=1),
    )
    filter: FilterConfig = field(default_factory=FilterConfig)


@dataclass
class OptimSection:
    """Optimisation (AdamW)."""

    lr: float = setting(
        1e-6, "Policy learning rate (AdamW; RAGEN base.yaml actor lr 1e-6).", range=Range(gt=0)
    )
    critic_lr: float = setting(
        1e-5, "Critic learning rate (RAGEN base.yaml critic lr 1e-5).", range=Range(gt=0)
    )
    weight_decay: float = setting(
        0.01,
        "AdamW decoupled weight decay (Loshchilov & Hutter 2019; verl default 0.01).",
        range=Range(ge=0),
    )
    beta1: float = setting(0.9, "AdamW first-moment decay beta1.", range=Range(ge=0, lt=1))
    beta2: float = setting(
        0.999,
        "AdamW second-moment decay beta2 (Loshchilov & Hutter 2019).",
        range=Range(ge=0, lt=1),
    )
    adam_eps: float = setting(1e-8, "AdamW epsilon in the denominator.", range=Range(gt=0))
    grad_clip: float = setting(
        1.0,
        "Clip the global gradient norm to this value; 0 = no clipping (verl default 1).",
        range=Range(ge=0),
    )
    warmup_steps: int = setting(
        0, "Rollout steps of linear learning-rate warm-up from 0.", range=Range(ge=0)
    )
    lr_schedule: str = setting(
        "constant",
        "Learning-rate decay after warm-up (ragen_train.schedules).",
        choices=LR_SCHEDULES,
    )
    min_lr_ratio: float = setting(
        0.0, "The decayed schedules end at min_lr_ratio * lr.", range=Range(ge=0, le=1)
    )
    ppo_epochs: int = setting(
        1, "Passes over each step's batch (verl ppo_epochs 1).", range=Range(ge=1)
    )
    mini_batches: int = setting(
        1,
        "Optimizer steps per pass: the batch is split into this many mini-batches.",
        range=Range(ge=1),
    )
    micro_batch_size: int = setting(
        8,
        "Samples per forward/backward (gradient accumulation; does not change the loss).",
        range=Range(ge=1),
    )


@dataclass
class SFTSection:
    """Supervised warm start on demonstrations (``ragen-train sft``)."""

    demo_policy: str = setting(
        "oracle",
        "Demonstrations from the env's oracle, oracle actions mixed with random ones, or a JSONL file.",
        choices=("oracle", "mixed", "jsonl"),
    )
    oracle_fraction: float = setting(
        1.0,
        "mixed: probability that a turn takes the oracle's action instead of a random one.",
        range=Range(ge=0, le=1),
    )
    demos_path: str | None = setting(
        None, "jsonl: the demonstrations file (chat messages per episode)."
    )
    episodes: int = setting(256, "Demonstration episodes played.", range=Range(ge=1))
    epochs: int = setting(1, "Passes over the demonstrations.", range=Range(ge=1))
    steps: int | None = setting(
        None, "Optimizer steps; null = episodes' samples / batch_size * epochs.", range=Range(ge=1)
    )
    lr: float = setting(1e-3, "SFT learning rate (AdamW).", range=Range(gt=0))
    batch_size: int = setting(16, "Samples per SFT optimizer step.", range=Range(ge=1))
    micro_batch_size: int = setting(
        8, "Samples per SFT forward/backward (gradient accumulation).", range=Range(ge=1)
    )
    seed_offset: int = setting(
        1_000_000,
        "Demonstrations play seeds seed_offset + i, away from the seeds StarPO trains on.",
        range=Range(ge=0),
    )


def _known_loggers() -> tuple[str, ...]:
    from .logger import KNOWN_LOGGERS

    return KNOWN_LOGGERS


@dataclass
class TrainerSection:
    """Loop, evaluation, checkpoints, logging."""

    total_steps: int = setting(
        200, "Rollout steps (each: rollouts, then the update).", range=Range(ge=1)
    )
    val_every: int = setting(10, "Validate every this many steps; 0 = never.", range=Range(ge=0))
    val_episodes: int = setting(
        64,
        "Validation episodes per round (fixed seeds 0..N-1 of env.val_split).",
        range=Range(ge=1),
    )
    val_temperature: float = setting(
        0.5,
        "Sampling temperature of validation; 0 = greedy (RAGEN val_kwargs temperature 0.5).",
        range=Range(ge=0),
    )
    val_before_train: bool = setting(True, "Validate once before the first step.")
    save_every: int = setting(
        100,
        "Checkpoint every this many steps and at the last; 0 = none (final_model is still written).",
        range=Range(ge=0),
    )
    keep_checkpoints: int = setting(
        1, "Checkpoints kept on disk (older ones are removed); 0 = keep all.", range=Range(ge=0)
    )
    out_dir: str = setting(
        "outputs/starpo", "Run directory: config.json, metrics.jsonl, checkpoints, final_model."
    )
    seed: int = setting(
        0,
        "Seed of torch/numpy/random, rollout sampling and mini-batch order (plus the rank); "
        "env seeds come from the step.",
        range=Range(ge=0),
    )
    loggers: list[str] = setting(
        factory=lambda: ["jsonl", "console"],
        help="Metric sinks (jsonl is always written).",
        item_choices=_known_loggers,
        item_noun="logger",
    )
    wandb_project: str = setting("ragen", "Weights & Biases project of the wandb logger.")
    collapse_every: int = setting(
        5,
        "Reasoning-collapse diagnostics every this many steps; 0 = never (RAGEN compute_freq 5).",
        range=Range(ge=0),
    )
    collapse_samples: int = setting(
        32,
        "Responses scored per collapse diagnostic (RAGEN collapse_detection num_samples).",
        range=Range(ge=1),
    )
    collapse_samplers: list[str] = setting(
        factory=lambda: ["first_turn"],
        help="Which prompts the collapse diagnostics sample: first turns, whole trajectories.",
        item_choices=("first_turn", "trajectory"),
        item_noun="sampler",
    )
    collapse_warn: bool = setting(
        True,
        "Warn (TemplateCollapseWarning) when MI / log M falls 0.2 below its running mean while "
        "entropy stays high (RAGEN-2's template collapse).",
    )
    distributed: str = setting(
        "ddp",
        "Multi-process wrapping under torchrun: DDP or FSDP2 (sharded).",
        choices=("ddp", "fsdp2"),
    )
    max_nonfinite_skips: int = setting(
        10,
        "Stop once more than this many optimizer steps were skipped for a non-finite loss or gradient.",
        range=Range(ge=0),
    )
    degenerate_warn_rate: float = setting(
        0.5,
        "Warn once when train/degenerate_rate (share of responses) reaches it (>=; a rate of 0 never counts).",
        range=Range(ge=0, le=1),
    )
    degenerate_stop_steps: int = setting(
        10,
        "Stop (checkpoints kept) after this many degenerate steps in a row; 0 = never.",
        range=Range(ge=0),
    )
    overwrite: bool = setting(
        False,
        "Start a new run in an out_dir that holds one (its metrics and checkpoints are removed).",
    )
    update_path: str = setting(
        "shared_prefix",
        "Update log-prob path: shared_prefix (group prompt once, LM head at trained positions), padded, or plain (earlier path).",
        choices=("shared_prefix", "padded", "plain"),
    )
    max_tokens_per_microbatch: int = setting(
        0,
        "Cap micro-batches by computed tokens (padding included), not by sample count; 0 = off.",
        range=Range(ge=0),
    )
    dist_timeout_s: float = setting(
        600.0,
        "Seconds a collective waits for the other ranks before the job fails with a one-line error.",
        range=Range(gt=0),
    )


@dataclass
class StarPOConfig:
    """A whole StarPO run."""

    name: str = setting("starpo", "Run name (wandb/verl experiment name, report title).")
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvSection = field(default_factory=EnvSection)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    algorithm: AlgorithmSection = field(default_factory=AlgorithmSection)
    optim: OptimSection = field(default_factory=OptimSection)
    sft: SFTSection = field(default_factory=SFTSection)
    trainer: TrainerSection = field(default_factory=TrainerSection)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


#: Every leaf field as declared (:func:`ragen_train.fields.field_specs`), in declaration order.
FIELD_SPECS = field_specs(StarPOConfig)
#: :data:`FIELD_SPECS` by dotted path.
FIELDS = {s.path: s for s in FIELD_SPECS}


# ------------------------------------------------------------------ validation


def validate(cfg: StarPOConfig, *, user_env_fields: set[str] | None = None) -> StarPOConfig:
    """Check every field's declared choices and range (:data:`FIELD_SPECS`); return ``cfg``.

    Args:
        cfg: the config.
        user_env_fields: the ``env.config`` keys the user wrote (overrides or a config
            file) as opposed to keys inherited from a preset; used only to decide whether
            an unknown-field error gets the "drop the preset's env settings" hint.

    Raises:
        TrainConfigError: naming the first offending field (choices first, then ranges,
            then list items, each in declaration order).
    """
    flat = _flatten(cfg.to_dict())
    top = [s for s in FIELD_SPECS if not s.in_list]  # list entries: multienv.check_env_lists
    for spec in top:
        choices = spec.choices
        if choices is not None and flat[spec.path] not in choices:
            raise TrainConfigError(spec.path, f"must be one of {choices}, got {flat[spec.path]!r}")
    for spec in top:
        value = flat.get(spec.path)
        problem = None if value is None or spec.range is None else spec.range.problem(value)
        if problem is not None:
            raise TrainConfigError(spec.path, problem)
    for spec in top:
        known = spec.item_choices
        for item in flat[spec.path] if known is not None else ():
            if item not in known:
                raise TrainConfigError(
                    spec.path, f"unknown {spec.item_noun} {item!r} (known: {', '.join(known)})"
                )
    if flat["model.mixed_precision"] != "none" and flat["model.dtype"] != "float32":
        raise TrainConfigError(
            "model.mixed_precision",
            f"keeps float32 master weights (bf16 only in compute): set model.dtype=float32, "
            f"not {flat['model.dtype']!r}",
        )
    if (
        ADVANTAGE_ESTIMATORS.meta(flat["algorithm.adv_estimator"], "level") == "outcome"
        and flat["rollout.group_size"] < 2
    ):
        raise TrainConfigError(
            "rollout.group_size", f"{flat['algorithm.adv_estimator']} needs groups of at least 2"
        )
    _validate_env(cfg, user_env_fields or set())
    return cfg


def _validate_env(cfg: StarPOConfig, user_env_fields: set[str]) -> None:
    """The env id is registered and ``env.config`` passes the env's config schema.

    Without this a config meant for another env (say ``risky_prob`` kept from a Bandit
    preset after ``env.id=ragen/Sokoban-v0``) would only fail inside every episode.  Only
    then — a field the env does not know that the user did not write — does the error
    suggest ``env.config={}``; a bad value of a known field, or a misspelt field the user
    typed, is reported as it is.
    """
    from .multienv import check_env_lists

    _validate_one_env("env.id", "env.config", cfg.env.id, cfg.env.config, user_env_fields)
    for config_field, env_id, env_config in check_env_lists(cfg):
        _validate_one_env(
            config_field.removesuffix(".config") + ".id",
            config_field,
            env_id,
            env_config,
            set(env_config),
        )


def _validate_one_env(
    id_field: str,
    config_field: str,
    env_id: str,
    env_config: dict[str, Any],
    user_env_fields: set[str],
) -> None:
    """:func:`_validate_env` for one env (``id_field`` / ``config_field`` name it in errors)."""
    import ragen_envs
    from ragen_envs.config import ConfigError as EnvConfigError
    from ragen_envs.config import validate_config

    try:
        entry = ragen_envs.get_entry(env_id)
    except Exception as exc:  # UnknownEnvError names close matches
        raise TrainConfigError(id_field, str(exc)) from None
    try:
        validate_config(entry.env_key, {**entry.kwargs, **env_config})
    except EnvConfigError as exc:
        field = f"{config_field}.{exc.field}" if exc.field else config_field
        unknown = exc.reason.startswith("unknown field")
        hint = (
            f" — override {config_field}={{}} to drop the preset's env settings"
            if unknown and exc.field not in user_env_fields
            else ""
        )
        raise TrainConfigError(field, f"{exc.reason} (env {env_id}){hint}") from None


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict) and k != "config":
            out.update(_flatten(v, key + "."))
        else:
            out[key] = v
    return out


# --------------------------------------------------------------- construction
def _coerce(value: Any, tp: Any, path: str) -> Any:
    """Convert ``value`` (parsed JSON or a raw string) to the field type ``tp``."""
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        if value is None or (isinstance(value, str) and value.lower() in ("none", "null")):
            if type(None) in args:
                return None
        errors = []
        for a in args:
            if a is type(None):
                continue
            try:
                return _coerce(value, a, path)
            except TrainConfigError as exc:
                errors.append(str(exc))
        raise TrainConfigError(path, f"cannot read {value!r} as {tp}")
    if dataclasses.is_dataclass(tp):
        if isinstance(value, str) and hasattr(
            tp, "from_text"
        ):  # a short form, e.g. env.train=<id>:<weight>,...
            try:
                return tp.from_text(value)
            except ValueError as exc:
                raise TrainConfigError(path, str(exc)) from None
        if not isinstance(value, dict):
            raise TrainConfigError(path, f"expected a mapping, got {value!r}")
        return from_dict(tp, value, path)
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "1", "0", "yes", "no"):
            return value.lower() in ("true", "1", "yes")
        raise TrainConfigError(path, f"expected true/false, got {value!r}")
    if tp is int:
        if isinstance(value, bool):
            raise TrainConfigError(path, f"expected an integer, got {value!r}")
        if isinstance(value, int):
            return value
        if isinstance(value, float) and value.is_integer():
            return int(value)
        if isinstance(value, str):
            try:
                return (
                    int(float(value))
                    if float(value).is_integer()
                    else _fail(path, value, "an integer")
                )
            except ValueError:
                pass
        raise TrainConfigError(path, f"expected an integer, got {value!r}")
    if tp is float:
        number: float | None = None
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            number = float(value)
        elif isinstance(value, str):
            try:
                number = float(value)
            except ValueError:
                pass
        if number is None:
            raise TrainConfigError(path, f"expected a number, got {value!r}")
        if not math.isfinite(number):
            raise TrainConfigError(path, f"must be a finite number, got {value!r}")
        return number
    if tp is str:
        if isinstance(value, (str, int, float)) and not isinstance(value, bool):
            return str(value)
        raise TrainConfigError(path, f"expected a string, got {value!r}")
    if origin is list:
        if isinstance(
            value, str
        ):  # a,b  or Hydra's [a,b] / [a, 'b'] (what RAGEN's and verl's configs write)
            text = value.strip()
            if text.startswith("[") and text.endswith("]"):
                text = text[1:-1]
            value = [v.strip().strip("'\"") for v in text.split(",") if v.strip()]
        if not isinstance(value, list):
            raise TrainConfigError(path, f"expected a list, got {value!r}")
        return (
            [_coerce(v, args[0], f"{path}[{i}]") for i, v in enumerate(value)]
            if args
            else list(value)
        )
    if origin is dict:
        if not isinstance(value, dict):
            raise TrainConfigError(path, f"expected a mapping, got {value!r}")
        return dict(value)
    return value


def _fail(path: str, value: Any, what: str) -> Any:
    raise TrainConfigError(path, f"expected {what}, got {value!r}")


def field_paths(data: dict[str, Any], prefix: str = "") -> list[str]:
    """Every dotted field path of a config dict (``optim.lr``, ``env.config``, ...), sections
    included; ``env.config`` mappings are not entered."""
    out: list[str] = []
    for k, v in data.items():
        out.append(prefix + k)
        if isinstance(v, dict) and k != "config":
            out += field_paths(v, f"{prefix}{k}.")
    return out


#: Names other trainers use for our fields (Hugging Face ``TrainingArguments``, TRL), so a
#: user who types theirs gets ours suggested (difflib alone misses ``learning_rate`` -> ``lr``).
FIELD_SYNONYMS: dict[str, str] = {
    "learning_rate": "lr",
    "max_grad_norm": "grad_clip",
    "lr_scheduler_type": "lr_schedule",
    "num_warmup_steps": "warmup_steps",
    "adam_epsilon": "adam_eps",
    "adam_beta1": "beta1",
    "adam_beta2": "beta2",
}


def did_you_mean(name: str, candidates: Any, *, prefix: str = "", cutoff: float = 0.6) -> str:
    """``"; did you mean optim.lr?"`` for the closest of ``candidates`` with as many dots as
    ``name`` (difflib ratio at least ``cutoff``; as for env ids in :func:`ragen_envs.get_entry`),
    else ``""``; ``prefix`` is put before each match (a leaf name is matched among its
    section's fields, a misspelt section as a whole dotted path)."""
    import difflib

    same_depth = sorted(
        c for c in candidates if c.count(".") == name.count(".")
    )  # optim.lrr: not "optim"
    close = difflib.get_close_matches(name, same_depth, n=3, cutoff=cutoff)
    if not close and FIELD_SYNONYMS.get(name) in same_depth:
        close = [FIELD_SYNONYMS[name]]  # another trainer's name for the field (learning_rate)
    return f"; did you mean {', '.join(prefix + c for c in close)}?" if close else ""


def field_elsewhere(leaf: str, paths: Any, *, cutoff: float = 0.8) -> str:
    """``"; did you mean optim.lr?"`` for a field named in the wrong section (``lr=1``,
    ``optim.kl_coef=0.1``): the dotted paths whose last part is ``leaf``, else whose last
    part is close to it (difflib ratio at least ``cutoff``), at most three; else ``""``."""
    import difflib

    by_leaf: dict[str, list[str]] = {}
    for p in sorted(paths):
        if "." in p:
            by_leaf.setdefault(p.rsplit(".", 1)[1], []).append(p)
    found = by_leaf.get(leaf) or [
        p
        for c in difflib.get_close_matches(leaf, list(by_leaf), n=3, cutoff=cutoff)
        for p in by_leaf[c]
    ]
    return f"; did you mean {', '.join(found[:3])}?" if found else ""


#: Renamed fields: old dotted path -> new one.  The old spelling is read (config files,
#: ``key=value`` overrides, saved configs) with one ``FutureWarning`` line, for one release.
RENAMED_FIELDS: dict[str, str] = {"rollout.engine": "rollout.sampler"}


def renamed_field(path: str) -> str:
    """The current name of dotted field ``path``: itself, or (with one ``FutureWarning``
    line) its new name when :data:`RENAMED_FIELDS` lists it."""
    new = RENAMED_FIELDS.get(path)
    if new is None:
        return path
    warnings.warn(
        f"{path} is deprecated and will be removed in the next release; use {new}",
        FutureWarning,
        stacklevel=3,
    )
    return new


def from_dict(cls: type, data: dict[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from a (possibly partial) dict, checking every key (a key
    of :data:`RENAMED_FIELDS` is read as its new name).

    Raises:
        TrainConfigError: an unknown field, a bad value, or a field given under both its
            old and its new name.
    """
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        fp = f"{path}.{key}" if path else key
        if fp in RENAMED_FIELDS:
            new_fp = renamed_field(fp)
            key = new_fp.rsplit(".", 1)[-1]
            if key in data:
                raise TrainConfigError(fp, f"give {new_fp} only (it replaces {fp})")
            fp = new_fp
        if key not in names:
            hint = did_you_mean(key, names, prefix=f"{path}." if path else "")
            raise TrainConfigError(fp, f"unknown field{hint} (known: {', '.join(sorted(names))})")
        kwargs[key] = _coerce(value, hints[key], fp)
    try:
        return cls(**kwargs)
    except ValueError as exc:  # a section that checks itself (FilterConfig): name the field
        sub = getattr(exc, "field", None)
        raise TrainConfigError(
            f"{path}.{sub}" if sub and path else path or cls.__name__,
            getattr(exc, "reason", str(exc)),
        ) from None


def apply_overrides(cfg: StarPOConfig, overrides: list[str]) -> StarPOConfig:
    """Apply ``key=value`` overrides (values parsed as JSON when possible).

    Raises:
        TrainConfigError: malformed override, unknown key or wrong type.
    """
    return _apply_overrides(cfg, overrides, set())


def _apply_overrides(
    cfg: StarPOConfig, overrides: list[str], user_env_fields: set[str]
) -> StarPOConfig:
    """:func:`apply_overrides`, recording in ``user_env_fields`` the ``env.config`` keys
    the overrides set (for :func:`_validate_env`'s hint)."""
    user_env_fields = set(user_env_fields)
    data = cfg.to_dict()
    for item in overrides:
        if "=" not in item:
            raise TrainConfigError(item, "overrides look like section.field=value")
        key, raw = item.split("=", 1)
        key = renamed_field(key.strip())
        try:  # issue 28: 30,000 brackets were a RecursionError in json.loads
            check_depth(raw)
        except NestingTooDeep as exc:
            raise TrainConfigError(key.strip(), str(exc)) from None
        try:
            value = json.loads(raw)
        except ValueError:
            value = raw
        node = data
        parts = key.strip().split(".")
        for i, part in enumerate(parts[:-1]):
            if not isinstance(node, dict) or part not in node:
                raise TrainConfigError(
                    ".".join(parts[: i + 1]),
                    "unknown section" + did_you_mean(key, field_paths(data), cutoff=0.8),
                )
            node = node[part]
        leaf = parts[-1]
        if not isinstance(node, dict) or (leaf not in node and parts[-2:-1] != ["config"]):
            parent = ".".join(parts[:-1])
            hint = (
                did_you_mean(leaf, node, prefix=f"{parent}." if parent else "")
                if isinstance(node, dict)
                else ""
            )
            raise TrainConfigError(
                key, "unknown field" + (hint or field_elsewhere(leaf, field_paths(data)))
            )
        node[leaf] = value
        if parts[:2] == ["env", "config"] and len(parts) >= 3:
            user_env_fields.add(parts[2])
        elif parts == ["env", "config"] and isinstance(value, dict):
            user_env_fields.update(value)
        elif parts == ["env"] and isinstance(value, dict) and isinstance(value.get("config"), dict):
            user_env_fields.update(value["config"])
    return validate(from_dict(StarPOConfig, data), user_env_fields=user_env_fields)


def load_config(name_or_path: str, overrides: list[str] | None = None) -> StarPOConfig:
    """A preset name or a JSON/YAML file, then overrides, validated.

    Raises:
        TrainConfigError: unknown preset; a file that cannot be read, is not valid JSON/YAML
            (field ``--config``; the message names the file and the line) or does not
            hold a mapping; a bad field (a field of a file's config is named with the file).
    """
    from .presets import PRESETS

    if name_or_path in PRESETS:
        return _apply_overrides(PRESETS[name_or_path](), overrides or [], set())
    p = Path(name_or_path)
    if not p.is_file():
        raise TrainConfigError(
            "--config",
            f"{name_or_path!r} is neither a preset ({', '.join(sorted(PRESETS))}) nor a file",
        )
    data = read_config_file(p)
    try:
        cfg = from_dict(StarPOConfig, data)
    except TrainConfigError as exc:
        raise TrainConfigError(exc.field, f"{exc.reason} (in {p})") from None
    env = data.get("env")
    file_env_fields = (
        set(env["config"])
        if isinstance(env, dict) and isinstance(env.get("config"), dict)
        else set()
    )
    return _apply_overrides(cfg, overrides or [], file_env_fields)


def read_config_file(path: str | Path) -> dict[str, Any]:
    """The mapping held by a JSON or YAML (``.yaml``/``.yml``) config file.

    Raises:
        TrainConfigError: (field ``--config``) the file cannot be read, is not valid JSON/YAML
            (the message names the file, line and column), breaks a bound of
            :func:`ragen_envs.safeload.load_config_file` (over 1 MiB, nested past 100 levels,
            YAML aliases past 64 uses or 100,000 expanded nodes) or holds something other
            than a mapping.
    """
    from ragen_envs.safeload import ConfigFileError, load_config_file

    p = Path(path)
    try:  # bounded: size, depth, YAML aliases (issue 28; ragen_envs/safeload.py)
        data = load_config_file(p)
    except ConfigFileError as exc:
        raise TrainConfigError("--config", str(exc)) from None
    if data is None:
        raise TrainConfigError("--config", f"{p} is empty (expected a mapping of config sections)")
    if not isinstance(data, dict):
        raise TrainConfigError(
            "--config",
            f"{p} holds a {type(data).__name__}, expected a mapping of config sections "
            "(name, model, env, rollout, ...)",
        )
    return data


def rollout_config_for(
    cfg: StarPOConfig, temperature: float | None = None, env_id: str | None = None
) -> RolloutConfig:
    """The agent-loop settings ``cfg`` plays ``env_id`` (default ``env.id``) with:
    :func:`ragen_bench.rollout.rollout_config` of the env and ``cfg.rollout``.

    Training, validation, SFT demonstrations, every back-end and ``ragen-train eval`` use it,
    so a model is evaluated the way it was trained.

    Args:
        temperature: sampling temperature (default ``rollout.temperature``).

    Raises:
        UnknownEnvError: unknown env id.  ValueError: a setting the harness rejects.
    """
    return rollout_config(env_id or cfg.env.id, cfg.rollout, temperature=temperature)


def explain_fields(name: str, cfg: StarPOConfig | None = None) -> str:
    """Text for ``ragen-train show-config --explain NAME``: each field's path, help, type,
    default and allowed values (:meth:`~ragen_train.fields.FieldSpec.explain`), plus its value
    in ``cfg`` when given.

    Args:
        name: a field (``optim.lr``, ``env.train[].weight``), a section (``optim``,
            ``rollout.vllm``) or ``all``.

    Raises:
        TrainConfigError: (field ``--explain``) an unknown name, with the closest ones.
    """
    name = RENAMED_FIELDS.get(name, name)  # an old name explains its new field
    if name == "all":
        chosen = FIELD_SPECS
    elif name in FIELDS:
        chosen = [FIELDS[name]]
    else:
        chosen = [s for s in FIELD_SPECS if s.path.startswith(name + ".")]
    if not chosen:
        sections = {s.section for s in FIELD_SPECS if s.section}
        hint = did_you_mean(name, [*FIELDS, *sections]) or field_elsewhere(
            name.rsplit(".", 1)[-1], FIELDS
        )
        raise TrainConfigError("--explain", f"no config field or section {name!r}{hint}")
    flat = _flatten(cfg.to_dict()) if cfg is not None else {}
    blocks = []
    for spec in chosen:
        text = spec.explain()
        if spec.path in flat:
            text += f"\n  value:   {json.dumps(flat[spec.path])}"
        blocks.append(text)
    return "\n\n".join(blocks)


def config_json_schema() -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of :class:`StarPOConfig` as saved in ``config.json``,
    generated from the field declarations (types, ``enum``, bounds, ``description``,
    ``default``); checked in as ``schemas/train_config.schema.json``."""
    return json_schema(
        StarPOConfig,
        schema_id="train_config.schema.json",
        title="ragen-train StarPO config (config.json of a training run)",
    )
