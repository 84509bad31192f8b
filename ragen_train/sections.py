"""The training config's sections: one dataclass per section of :class:`StarPOConfig`.

Each field is declared once, with :func:`~ragen_train.fields.setting` (help, default, range,
choices); :data:`FIELD_SPECS` reads the declarations back. :mod:`ragen_train.config` loads,
overrides and validates configs of these classes; :mod:`ragen_train.presets` builds named
ones. This module imports neither, so the three import in one direction
(``presets -> sections``, ``config -> presets, sections``; tests/test_import_graph.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ragen_bench.rollout import CONTEXT_MODES, SYSTEM_PROMPTS, RolloutConfig
from ragen_bench.types import SamplingParams
from ragen_envs.ranges import Range

from .advantages import ADVANTAGE_ESTIMATORS
from .fields import field_specs, setting
from .filtering import FilterConfig
from .losses import AGG_MODES, KL_ESTIMATORS
from .multienv import TrainEnv, ValEnv
from .schedules import LR_SCHEDULES

_DTYPES = ("float32", "bfloat16", "float16")
_SPLITS = ("train", "validation", "test")
#: The values of ``rollout.sampler``: who samples the rollouts (:mod:`ragen_train.rollout_engine`).
SAMPLERS = ("auto", "hf", "vllm")

#: Upper bounds of the episode counts, far above any recipe (RAGEN's largest: 128 episodes a
#: step, 400 steps, 512 validation episodes), so that a slip such as ``rollout.env_groups=1e9``
#: is refused at once, naming the field and the bound, instead of playing for hours.
MAX_ENV_GROUPS = 4096
MAX_GROUP_SIZE = 1024
#: ``rollout.env_groups x rollout.group_size``: the episodes of one step (checked by
#: :func:`ragen_train.config.validate`).
MAX_EPISODES_PER_STEP = 65_536
MAX_STEPS = 1_000_000
MAX_EPISODES = 1_000_000


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
    :mod:`ragen_train.rollout_engine`).  ``dtype`` ``auto``: bfloat16 on GPUs, float32 on every
    CPU, where a bf16 engine would round the LoRA update away (``rollout_engine.engine_dtype``)."""

    dtype: str = setting(
        "auto",
        "vLLM engine weight dtype; auto = bfloat16 on GPUs, float32 on CPUs (a bf16 engine rounds a LoRA update away).",
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
# ``None`` = the env's ``agent_defaults``; :func:`ragen_bench.rollout.rollout_config` reads
# exactly these from the section.


@dataclass
class RolloutSection:
    """Rollouts per step and the agent-loop protocol (``None`` = the env's default).

    The protocol fields (:data:`ragen_bench.rollout.PROTOCOL_FIELDS`) are :class:`~ragen_bench.rollout.RolloutConfig`'s
    and take their defaults from it; ``temperature`` and ``top_p`` are
    :class:`~ragen_bench.types.SamplingParams`'s.

    ``sampler``: who samples the rollouts — ``hf`` (transformers ``generate`` on the training
    model), ``vllm`` (a colocated vLLM engine synced after every optimizer step) or
    ``auto`` (``vllm`` when vLLM is installed and the model is not small: neither ``tiny`` nor
    a folder of under 100 MB of weights, :func:`ragen_train.rollout_engine.resolve_sampler`).
    """

    env_groups: int = setting(
        8,
        "Prompt groups per step: distinct env seeds (RAGEN es_manager.train.env_groups 8).",
        range=Range(ge=1, le=MAX_ENV_GROUPS),
    )
    group_size: int = setting(
        8,
        "Episodes per group, all on the group's seed (RAGEN group_size; GRPO needs >= 2).",
        range=Range(ge=1, le=MAX_GROUP_SIZE),
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
        64, "Most episodes generated in one batched forward pass (hf sampler).", range=Range(ge=1)
    )
    format_reminder: bool = setting(
        RolloutConfig.format_reminder,
        "Restate the answer format at the end of every user message (helps small instruct models).",
    )
    sampler: str = setting(
        "auto",
        "Who samples rollouts: transformers generate (hf), a colocated vLLM engine, or auto "
        "(vllm when installed, unless the model is tiny or under 100 MB).",
        choices=SAMPLERS,
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
    episodes: int = setting(
        256, "Demonstration episodes played.", range=Range(ge=1, le=MAX_EPISODES)
    )
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
        200, "Rollout steps (each: rollouts, then the update).", range=Range(ge=1, le=MAX_STEPS)
    )
    val_every: int = setting(10, "Validate every this many steps; 0 = never.", range=Range(ge=0))
    val_episodes: int = setting(
        64,
        "Validation episodes per round (fixed seeds 0..N-1 of env.val_split).",
        range=Range(ge=1, le=MAX_EPISODES),
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
    allocator: str = setting(
        "auto",
        "Memory allocator: auto (on CPU: tcmalloc, else jemalloc, else glibc with a 4 MiB mmap threshold), tcmalloc, jemalloc, glibc or system; RAGEN_ALLOCATOR wins.",
        choices=("auto", "tcmalloc", "jemalloc", "glibc", "system"),
        required=False,  # added after the committed runs
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
