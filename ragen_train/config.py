"""Training configuration: dataclasses, presets, ``key=value`` overrides.

A config is a :class:`StarPOConfig` (nested dataclasses).  It comes from a preset
(:mod:`ragen_train.presets`) or a JSON/YAML file, then ``key=value`` overrides with
dotted paths (``algorithm.adv_estimator=gae optim.lr=1e-5``) are applied; every value
is type-checked against the dataclass field and a wrong or unknown key raises
:class:`TrainConfigError` naming the field.  :func:`config_json_schema` derives the JSON
Schema of the saved ``config.json`` (checked in as ``schemas/train_config.schema.json``).
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Collection
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ragen_bench.rollout import CONTEXT_MODES, SYSTEM_PROMPTS, RolloutConfig
from ragen_bench.types import SamplingParams
from ragen_envs.ranges import Range

from .advantages import ADVANTAGE_ESTIMATORS
from .filtering import LOSS_SCALING, METRICS, SCOPES, STRATEGIES, FilterConfig
from .losses import AGG_MODES, KL_ESTIMATORS
from .multienv import TrainEnv, ValEnv
from .schedules import LR_SCHEDULES


class TrainConfigError(ValueError):
    """A training config field is unknown, mistyped or out of range (``field`` names it).

    ``field`` is a dotted config path (``optim.lr``) or a command-line option
    (``--config``); ``reason`` says what is wrong.  (Not :class:`ragen_envs.ConfigError`,
    which names a field of an *environment* config.)
    """

    def __init__(self, field_path: str, reason: str):
        self.field = field_path
        self.reason = reason
        where = field_path if field_path.startswith("--") else f"config field {field_path!r}"
        super().__init__(f"{where}: {reason}")


@dataclass
class LoraConfig:
    """LoRA adapters via peft (``rank > 0`` enables them; Hu et al. 2021, arXiv 2106.09685)."""

    rank: int = 0
    alpha: int = 16
    dropout: float = 0.0
    target_modules: str = "all-linear"
    save: str = "adapter"  # "adapter" | "merged"


@dataclass
class ModelConfig:
    """The policy model.

    ``path`` is a model directory, a hub id, or ``"tiny"`` (built offline).
    """

    path: str = "tiny"
    dtype: str = "float32"
    device: str = "cpu"
    gradient_checkpointing: bool = False
    lora: LoraConfig = field(default_factory=LoraConfig)
    # "bf16": float32 master weights and optimizer state, bfloat16 compute (FSDP2
    # MixedPrecisionPolicy; autocast for DDP / one process); needs model.dtype=float32
    mixed_precision: str = "none"


@dataclass
class EnvSection:
    """The training environment: an id, config overrides, train/validation splits.

    ``train`` / ``val``: several envs at once (:mod:`ragen_train.multienv`; empty = the one
    env ``id`` with ``config``, which SFT and ``ragen-train eval`` use in any case).
    """

    id: str = "ragen/Bandit-v0"
    config: dict[str, Any] = field(default_factory=dict)
    train_split: str = "train"
    val_split: str = "validation"
    test_split: str = "test"
    train: list[TrainEnv] = field(default_factory=list)
    val: list[ValEnv] = field(default_factory=list)


@dataclass
class VLLMSection:
    """The colocated vLLM rollout engine (``rollout.engine=vllm``; see
    :mod:`ragen_train.rollout_engine`).  ``dtype`` ``auto`` takes ``model.dtype``."""

    dtype: str = "auto"
    gpu_memory_utilization: float = 0.5
    tensor_parallel_size: int = 1
    max_model_len: int | None = None
    kv_cache_gb: float = 2.0  # CPU only (VLLM_CPU_KVCACHE_SPACE)
    sleep_mode: bool = True  # GPU only: free the engine's memory during the update
    enforce_eager: bool = True
    check_sync: bool = True  # compare one weight after every sync


#: The agent-loop protocol fields of ``rollout`` *are* those of the bench's
#: :class:`~ragen_bench.rollout.RolloutConfig`: same names, same defaults (read from it),
#: except that the per-env budgets (``max_turns``, ``max_actions_per_turn``) default to
#: ``None`` = the env's ``agent_defaults``.  :func:`agent_protocol` passes exactly these.
PROTOCOL_FIELDS = (
    "max_turns",
    "max_actions_per_turn",
    "enable_think",
    "system_prompt",
    "context_mode",
    "context_window",
    "max_context_tokens",
    "format_penalty",
    "max_invalid_answers",
    "format_reminder",
)
#: The sampling fields of ``rollout`` (those of :class:`~ragen_bench.types.SamplingParams`).
SAMPLING_FIELDS = ("temperature", "top_p", "max_new_tokens")


@dataclass
class RolloutSection:
    """Rollouts per step and the agent-loop protocol (``None`` = the env's default).

    The protocol fields (:data:`PROTOCOL_FIELDS`) are :class:`~ragen_bench.rollout.RolloutConfig`'s
    and take their defaults from it; ``temperature`` and ``top_p`` are
    :class:`~ragen_bench.types.SamplingParams`'s.

    ``engine``: who samples the rollouts — ``hf`` (transformers ``generate`` on the training
    model), ``vllm`` (a colocated vLLM engine synced after every optimizer step) or
    ``auto`` (``vllm`` when vLLM is installed and the model is not ``tiny``).
    """

    env_groups: int = 8
    group_size: int = 8
    max_turns: int | None = None
    max_actions_per_turn: int | None = None
    enable_think: bool = RolloutConfig.enable_think
    system_prompt: str = RolloutConfig.system_prompt
    context_mode: str = RolloutConfig.context_mode
    context_window: int = RolloutConfig.context_window
    max_context_tokens: int | None = RolloutConfig.max_context_tokens
    format_penalty: float = RolloutConfig.format_penalty
    max_invalid_answers: int | None = RolloutConfig.max_invalid_answers
    temperature: float = SamplingParams.temperature
    top_p: float = SamplingParams.top_p
    max_new_tokens: int = 64  # training responses are shorter than the bench's default 256
    reward_placement: str = "last_token"  # "last_token" | "turn_end"
    batch_size: int = 64
    format_reminder: bool = (
        RolloutConfig.format_reminder
    )  # restate the answer format at the end of every user message
    engine: str = "auto"  # "auto" | "hf" | "vllm"
    vllm: VLLMSection = field(default_factory=VLLMSection)


#: The ``algorithm.filter`` section *is* the filter's own settings (one definition).
FilterSection = FilterConfig


@dataclass
class AlgorithmSection:
    """Advantage estimation and losses (RAGEN base.yaml defaults where they exist)."""

    adv_estimator: str = "grpo"
    gamma: float = 1.0
    lam: float = 1.0
    turn_gamma: float = 0.95
    whiten_advantages: bool = True
    grpo_eps: float = 1e-6
    loss_agg_mode: str = "token-mean"
    norm_len: int | None = None
    clip_low: float = 0.2
    clip_high: float = 0.28
    dual_clip: float | None = 3.0
    entropy_coef: float = 0.001
    kl_coef: float = 0.0
    kl_estimator: str = "k3"
    kl_in_reward: bool = False
    value_clip: float | None = 0.5
    vf_coef: float = 1.0
    # Truncated importance sampling for the rollout/train mismatch (Yao et al. 2025, "Your
    # Efficient RL Framework Secretly Brings You Off-Policy RL Training"; verl's
    # tis_imp_ratio_cap): "auto" = on with the vllm engine.
    tis: str = "auto"  # "auto" | "on" | "off"
    tis_cap: float = 2.0
    filter: FilterConfig = field(default_factory=FilterConfig)


@dataclass
class OptimSection:
    """Optimisation (AdamW)."""

    lr: float = 1e-6
    critic_lr: float = 1e-5
    weight_decay: float = 0.01
    beta1: float = 0.9
    beta2: float = 0.999
    adam_eps: float = 1e-8
    grad_clip: float = 1.0
    warmup_steps: int = 0
    lr_schedule: str = (
        "constant"  # after warm-up: "constant" | "linear" | "cosine" decay (ragen_train.schedules)
    )
    min_lr_ratio: float = 0.0  # the decayed schedules end at min_lr_ratio * lr
    ppo_epochs: int = 1
    mini_batches: int = 1
    micro_batch_size: int = 8


@dataclass
class SFTSection:
    """Supervised warm start on demonstrations (``ragen-train sft``)."""

    demo_policy: str = "oracle"  # "oracle" | "mixed" | "jsonl"
    oracle_fraction: float = 1.0
    demos_path: str | None = None
    episodes: int = 256
    epochs: int = 1
    steps: int | None = None
    lr: float = 1e-3
    batch_size: int = 16
    micro_batch_size: int = 8
    seed_offset: int = 1_000_000


@dataclass
class TrainerSection:
    """Loop, evaluation, checkpoints, logging."""

    total_steps: int = 200
    val_every: int = 10
    val_episodes: int = 64
    val_temperature: float = 0.5
    val_before_train: bool = True
    save_every: int = 100
    keep_checkpoints: int = 1
    out_dir: str = "outputs/starpo"
    seed: int = 0
    loggers: list[str] = field(default_factory=lambda: ["jsonl", "console"])
    wandb_project: str = "ragen"
    collapse_every: int = 5
    collapse_samples: int = 32
    collapse_samplers: list[str] = field(default_factory=lambda: ["first_turn"])
    collapse_warn: bool = True
    distributed: str = "ddp"  # "ddp" | "fsdp2" (used under torchrun)
    max_nonfinite_skips: int = 10
    degenerate_warn_rate: float = (
        0.5  # warn once when train/degenerate_rate exceeds it (share of responses)
    )
    degenerate_stop_steps: int = (
        10  # stop (checkpoints kept) after this many such steps in a row; 0 = never
    )
    overwrite: bool = False  # start a new run in an out_dir that holds one (its metrics and checkpoints are removed)
    dist_timeout_s: float = (
        600.0  # a collective waits this long for the other ranks, then the job fails
    )


@dataclass
class StarPOConfig:
    """A whole StarPO run."""

    name: str = "starpo"
    model: ModelConfig = field(default_factory=ModelConfig)
    env: EnvSection = field(default_factory=EnvSection)
    rollout: RolloutSection = field(default_factory=RolloutSection)
    algorithm: AlgorithmSection = field(default_factory=AlgorithmSection)
    optim: OptimSection = field(default_factory=OptimSection)
    sft: SFTSection = field(default_factory=SFTSection)
    trainer: TrainerSection = field(default_factory=TrainerSection)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------ validation
_CHOICES: dict[str, Collection[Any]] = {
    "model.dtype": ("float32", "bfloat16", "float16"),
    "model.lora.save": ("adapter", "merged"),
    "rollout.context_mode": CONTEXT_MODES,
    "rollout.system_prompt": SYSTEM_PROMPTS,
    "rollout.reward_placement": ("last_token", "turn_end"),
    "rollout.engine": ("auto", "hf", "vllm"),
    "rollout.vllm.dtype": ("auto", "float32", "bfloat16", "float16"),
    "algorithm.tis": ("auto", "on", "off"),
    # Registries, read at validation time: a part registered later (a plug-in) is accepted.
    "algorithm.adv_estimator": ADVANTAGE_ESTIMATORS,
    "algorithm.loss_agg_mode": AGG_MODES,
    "algorithm.kl_estimator": KL_ESTIMATORS,
    "optim.lr_schedule": LR_SCHEDULES,
    "algorithm.filter.strategy": tuple(sorted(STRATEGIES)),
    "algorithm.filter.metric": METRICS,
    "algorithm.filter.top_p_mode": ("linear", "softmax"),
    "algorithm.filter.loss_scaling": LOSS_SCALING,
    "algorithm.filter.scope": SCOPES,
    "sft.demo_policy": ("oracle", "mixed", "jsonl"),
    "env.train_split": ("train", "validation", "test"),
    "env.val_split": ("train", "validation", "test"),
    "env.test_split": ("train", "validation", "test"),
    "trainer.distributed": ("ddp", "fsdp2"),
    "model.mixed_precision": ("none", "bf16"),
}

#: Allowed values of every numeric field (``None`` values of optional fields are not
#: checked).  :func:`validate` checks them and :func:`config_json_schema` writes them into
#: ``schemas/train_config.schema.json``; a non-finite float is refused for every field
#: when the config is read (:func:`_coerce`).
_RANGES: dict[str, Range] = {
    "model.lora.rank": Range(ge=0),
    "model.lora.alpha": Range(gt=0),
    "model.lora.dropout": Range(ge=0, lt=1),
    "rollout.env_groups": Range(ge=1),
    "rollout.group_size": Range(ge=1),
    "rollout.max_turns": Range(ge=1),
    "rollout.max_actions_per_turn": Range(ge=1),
    "rollout.context_window": Range(ge=0),
    "rollout.max_context_tokens": Range(ge=1),
    "rollout.max_invalid_answers": Range(ge=1),
    "rollout.temperature": Range(gt=0),  # training rollouts must sample
    "rollout.top_p": Range(gt=0, le=1),
    "rollout.max_new_tokens": Range(ge=1),
    "rollout.batch_size": Range(ge=1),
    "algorithm.gamma": Range(ge=0, le=1),
    "algorithm.lam": Range(ge=0, le=1),
    "algorithm.turn_gamma": Range(ge=0, le=1),
    "algorithm.grpo_eps": Range(gt=0),
    "algorithm.norm_len": Range(ge=1),
    # PPO ratio clip [1 - clip_low, 1 + clip_high] (Schulman et al. 2017, eq. 7; DAPO's clip-higher).
    "algorithm.clip_low": Range(ge=0, le=1),
    "algorithm.clip_high": Range(ge=0),
    "algorithm.dual_clip": Range(gt=1),  # dual-clip PPO's c > 1 (Ye et al. 2020, arXiv 1912.09729)
    "algorithm.entropy_coef": Range(ge=0),
    "algorithm.kl_coef": Range(ge=0),
    "algorithm.value_clip": Range(gt=0),
    "algorithm.vf_coef": Range(ge=0),
    "algorithm.filter.value": Range(ge=0),
    "algorithm.filter.eps": Range(ge=0),
    "algorithm.filter.empty_stop_steps": Range(ge=1),
    "optim.lr": Range(gt=0),
    "optim.critic_lr": Range(gt=0),
    "optim.weight_decay": Range(ge=0),
    "optim.beta1": Range(ge=0, lt=1),
    "optim.beta2": Range(ge=0, lt=1),  # AdamW (Loshchilov & Hutter 2019)
    "optim.adam_eps": Range(gt=0),
    "optim.grad_clip": Range(ge=0),  # 0: no clipping
    "optim.warmup_steps": Range(ge=0),
    "optim.min_lr_ratio": Range(ge=0, le=1),
    "optim.ppo_epochs": Range(ge=1),
    "optim.mini_batches": Range(ge=1),
    "optim.micro_batch_size": Range(ge=1),
    "sft.oracle_fraction": Range(ge=0, le=1),
    "sft.episodes": Range(ge=1),
    "sft.epochs": Range(ge=1),
    "sft.steps": Range(ge=1),
    "sft.lr": Range(gt=0),
    "sft.batch_size": Range(ge=1),
    "sft.micro_batch_size": Range(ge=1),
    "sft.seed_offset": Range(ge=0),
    "trainer.total_steps": Range(ge=1),
    "trainer.val_every": Range(ge=0),  # 0: never
    "trainer.val_episodes": Range(ge=1),
    "trainer.val_temperature": Range(ge=0),
    "trainer.save_every": Range(ge=0),
    "trainer.keep_checkpoints": Range(ge=0),
    "trainer.dist_timeout_s": Range(gt=0),
    "trainer.seed": Range(ge=0),
    "trainer.collapse_every": Range(ge=0),
    "trainer.collapse_samples": Range(ge=1),
    "trainer.max_nonfinite_skips": Range(ge=0),
    "trainer.degenerate_warn_rate": Range(ge=0, le=1),
    "trainer.degenerate_stop_steps": Range(ge=0),  # 0: never stop
    "algorithm.tis_cap": Range(ge=1),  # the largest importance weight kept (truncated IS)
    "rollout.vllm.tensor_parallel_size": Range(ge=1),
    "rollout.vllm.gpu_memory_utilization": Range(gt=0, le=1),
    "rollout.vllm.kv_cache_gb": Range(gt=0),
}


def validate(cfg: StarPOConfig, *, user_env_fields: set[str] | None = None) -> StarPOConfig:
    """Check choices and ranges (:data:`_RANGES`); return ``cfg``.

    Args:
        cfg: the config.
        user_env_fields: the ``env.config`` keys the user wrote (overrides or a config
            file) as opposed to keys inherited from a preset; used only to decide whether
            an unknown-field error gets the "drop the preset's env settings" hint.

    Raises:
        TrainConfigError: naming the first offending field.
    """
    flat = _flatten(cfg.to_dict())
    for key, choices in _CHOICES.items():
        if flat[key] not in choices:
            raise TrainConfigError(key, f"must be one of {list(choices)}, got {flat[key]!r}")
    for key, allowed in _RANGES.items():
        value = flat.get(key)
        problem = None if value is None else allowed.problem(value)
        if problem is not None:
            raise TrainConfigError(key, problem)
    if flat["model.mixed_precision"] != "none" and flat["model.dtype"] != "float32":
        raise TrainConfigError(
            "model.mixed_precision",
            f"keeps float32 master weights (bf16 only in compute): set model.dtype=float32, "
            f"not {flat['model.dtype']!r}",
        )
    for sampler in flat["trainer.collapse_samplers"]:
        if sampler not in ("first_turn", "trajectory"):
            raise TrainConfigError(
                "trainer.collapse_samplers", f"unknown sampler {sampler!r} (first_turn, trajectory)"
            )
    from .logger import KNOWN_LOGGERS

    for name in flat["trainer.loggers"]:
        if name not in KNOWN_LOGGERS:
            raise TrainConfigError(
                "trainer.loggers", f"unknown logger {name!r} (known: {', '.join(KNOWN_LOGGERS)})"
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


def from_dict(cls: type, data: dict[str, Any], path: str = "") -> Any:
    """Build dataclass ``cls`` from a (possibly partial) dict, checking every key."""
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        fp = f"{path}.{key}" if path else key
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
            (the message names the file, line and column) or holds something other than a
            mapping.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise TrainConfigError("--config", f"cannot read {p}: {exc}") from None
    if p.suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ImportError as exc:
            raise TrainConfigError(
                "--config", "reading YAML needs PyYAML (pip install pyyaml)"
            ) from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            where = (
                f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
            )
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise TrainConfigError("--config", f"{p}: invalid YAML{where}: {problem}") from None
    else:
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TrainConfigError(
                "--config", f"{p}: invalid JSON at line {exc.lineno}, column {exc.colno}: {exc.msg}"
            ) from None
    if data is None:
        raise TrainConfigError("--config", f"{p} is empty (expected a mapping of config sections)")
    if not isinstance(data, dict):
        raise TrainConfigError(
            "--config",
            f"{p} holds a {type(data).__name__}, expected a mapping of config sections "
            "(name, model, env, rollout, ...)",
        )
    return data


def agent_protocol(cfg: StarPOConfig, temperature: float | None = None) -> dict[str, Any]:
    """The agent-loop protocol of ``cfg`` as ``RolloutConfig`` overrides.

    The dict ``ragen_bench.runner.rollout_config_from`` (and ``RunRequest.rollout``)
    take: ``None`` values mean the env's ``agent_defaults``.  Training, validation and
    ``ragen-train eval`` all play episodes with it, so a model is evaluated the way it was
    trained.

    Args:
        cfg: the run config.
        temperature: sampling temperature (default ``cfg.rollout.temperature``).
    """
    r = cfg.rollout
    sampling = {name: getattr(r, name) for name in SAMPLING_FIELDS}
    if temperature is not None:
        sampling["temperature"] = temperature
    return {**{name: getattr(r, name) for name in PROTOCOL_FIELDS}, "sampling": sampling}


def config_json_schema() -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of :class:`StarPOConfig` as saved in ``config.json``."""

    def schema_of(tp: Any, path: str) -> dict[str, Any]:
        origin, args = typing.get_origin(tp), typing.get_args(tp)
        if origin in (typing.Union, types.UnionType):
            return {"anyOf": [schema_of(a, path) for a in args]}
        if tp is type(None):
            return {"type": "null"}
        if dataclasses.is_dataclass(tp):
            hints = typing.get_type_hints(tp)
            props = {
                f.name: schema_of(hints[f.name], f"{path}.{f.name}" if path else f.name)
                for f in dataclasses.fields(tp)
            }
            return {
                "type": "object",
                "additionalProperties": False,
                "properties": props,
                "required": sorted(props),
            }
        if path in _CHOICES:
            return {"enum": list(_CHOICES[path])}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer", **(_RANGES[path].schema() if path in _RANGES else {})}
        if tp is float:
            return {"type": "number", **(_RANGES[path].schema() if path in _RANGES else {})}
        if tp is str:
            return {"type": "string"}
        if origin is list:
            return {"type": "array", "items": schema_of(args[0], path) if args else {}}
        if origin is dict:
            return {"type": "object"}
        return {}

    schema = schema_of(StarPOConfig, "")
    schema.update(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": "train_config.schema.json",
            "title": "ragen-train StarPO config (config.json of a training run)",
        }
    )
    return schema
