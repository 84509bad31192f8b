"""Named training presets (``ragen-train starpo --config <name>``).

Task presets follow RAGEN's task configs where they exist (``config/_1_bandit.yaml``
… ``_10_deepcoder.yaml`` and ``config/base.yaml`` of RAGEN-AI/RAGEN): 8 env groups × 16
rollouts, PPO with GAE or GRPO, entropy 0.001, clip 0.2/0.28, lr 1e-6, 400 tokens per turn.
Their model is a hub id (Qwen/Qwen2.5-0.5B-Instruct; override ``model.path=``).
``quickstart`` and the ``tiny-*`` presets use the tiny offline model and settings that
learn on a laptop CPU in minutes.

``cpu-*-lora`` presets train a real local instruct model (``$RAGEN_REAL_MODEL``, default
the directory ``../shared/tools/small-model`` builds: Qwen2.5-Coder-0.5B-Instruct) with LoRA
and vLLM rollouts on a CPU (examples/real_model_run.py).  ``ragen2-<alg>-<env>-<size>``
are the RAGEN-2 GPU recipes (arXiv 2604.06268): PPO (GAE,
token-mean), DAPO (group advantages, token-mean, clip 0.2/0.28, no KL; Yu et al. 2025, arXiv
2503.14476), GRPO (std-normalised, seq-mean-token-mean) and Dr. GRPO (no std,
seq-mean-token-sum; Liu et al. 2025, arXiv 2503.20783), all with SNR-aware top-p 0.9
filtering (softmax mode, include_zero), 8 groups × 16, 5 turns × 2 actions, 400 tokens a
turn, entropy 0.001, no KL, lr 1e-6, 400 steps, validation on 512 episodes at T 0.5, vLLM
rollouts at ``gpu_memory_utilization`` 0.3 and ``max_model_len`` 3600 (RAGEN base.yaml).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .sections import (
    AlgorithmSection,
    EnvSection,
    FilterSection,
    LoraConfig,
    ModelConfig,
    OptimSection,
    RolloutSection,
    SFTSection,
    StarPOConfig,
    TrainerSection,
    VLLMSection,
)

DEFAULT_HUB_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _task(
    name: str,
    env_id: str,
    *,
    turns: int | None = None,
    actions: int | None = None,
    estimator: str = "gae",
    max_new_tokens: int = 400,
    **env_config: object,
) -> StarPOConfig:
    return StarPOConfig(
        name=name,
        model=ModelConfig(path=DEFAULT_HUB_MODEL, dtype="bfloat16", device="cuda"),
        env=EnvSection(id=env_id, config=dict(env_config)),
        rollout=RolloutSection(
            env_groups=8,
            group_size=16,
            max_turns=turns,
            max_actions_per_turn=actions,
            max_new_tokens=max_new_tokens,
            batch_size=128,
        ),
        algorithm=AlgorithmSection(adv_estimator=estimator),
        optim=OptimSection(lr=1e-6, critic_lr=1e-5, micro_batch_size=4, mini_batches=4),
        trainer=TrainerSection(
            total_steps=200,
            val_every=10,
            val_episodes=256,
            save_every=100,
            out_dir=f"outputs/{name}",
        ),
    )


def _tiny(
    name: str,
    env_id: str,
    estimator: str,
    *,
    steps: int,
    sft_episodes: int,
    sft_steps: int,
    oracle_fraction: float,
    lr: float,
    env_config: dict | None = None,
    **rollout: object,
) -> StarPOConfig:
    """Settings with which the tiny model learns on two CPU cores in minutes.

    The tiny model starts from random weights, so the env's rules in the system prompt are
    dead weight: these presets use the minimal system prompt and answer-only responses
    (``<answer>…</answer>``), which also makes each step several times cheaper.
    """
    r = dict(
        env_groups=8,
        group_size=8,
        max_new_tokens=16,
        context_mode="single_turn",
        batch_size=64,
        temperature=1.0,
        enable_think=False,
        system_prompt="minimal",
    )
    r.update(rollout)
    return StarPOConfig(
        name=name,
        model=ModelConfig(path="tiny", dtype="float32", device="cpu"),
        env=EnvSection(id=env_id, config=dict(env_config or {})),
        rollout=RolloutSection(**r),  # type: ignore[arg-type]
        algorithm=AlgorithmSection(
            adv_estimator=estimator,
            entropy_coef=0.0,
            loss_agg_mode="token-mean",
            filter=FilterSection(),
        ),
        optim=OptimSection(
            lr=lr,
            critic_lr=1e-3,
            micro_batch_size=64,
            mini_batches=1,
            ppo_epochs=1,
            grad_clip=1.0,
            weight_decay=0.0,
        ),
        sft=SFTSection(
            demo_policy="mixed",
            oracle_fraction=oracle_fraction,
            episodes=sft_episodes,
            steps=sft_steps,
            lr=2e-3,
            batch_size=32,
            micro_batch_size=32,
        ),
        trainer=TrainerSection(
            total_steps=steps,
            val_every=5,
            val_episodes=64,
            val_temperature=0.5,
            save_every=10,
            out_dir=f"outputs/{name}",
            loggers=["jsonl", "console"],
            collapse_every=0,
        ),
    )


# Bandit: the SFT teacher is the oracle 60% of the time and a uniformly random arm otherwise
# (80% of demonstrations pick the better arm); 120 SFT steps leave the SFT model near chance on held-out pairs and RL something to learn.  Payoffs are
# made deterministic (risky arm pays 1.0 always, steady 0.1): with RAGEN's defaults (1.0 with
# probability 0.25) group-std normalisation gives the better arm a *negative* expected GRPO
# advantage (simulated: -0.34 per group of 8 when half the group picks it; Dr. GRPO's
# unnormalised advantage is +0.26), and 30 steps of 64 single-pull episodes are too few for
# the noise with GRPO even at probability 0.5 (measured 0.58 -> 0.51), while PPO with a critic
# learned that setting (0.58 -> 0.96 held-out success in 30 steps).
_BANDIT = dict(
    steps=30,
    sft_episodes=4096,
    sft_steps=120,
    oracle_fraction=0.6,
    lr=2e-4,
    env_config={"risky_prob": 1.0},
)
# Sokoban-Easy: oracle demonstrations; the tiny model (2 layers, width 128) reaches about 0.3
# held-out success after 640 SFT steps and RL sharpens it.  16 groups of 4 (more distinct
# puzzles per step) learned faster than 8 of 8 in our sweeps.
_SOKOBAN = dict(
    steps=50,
    sft_episodes=8192,
    sft_steps=640,
    oracle_fraction=1.0,
    lr=5e-4,
    env_groups=16,
    group_size=4,
)


def real_model_path() -> str:
    """``$RAGEN_REAL_MODEL``, else the small-model tool's cache directory
    (``${RAGEN_MODEL_CACHE:-~/.cache/ragen-models}/qwen2.5-coder-0.5b-instruct``)."""
    env = os.environ.get("RAGEN_REAL_MODEL")
    if env:
        return env
    cache = Path(os.environ.get("RAGEN_MODEL_CACHE", Path.home() / ".cache" / "ragen-models"))
    return str(cache / "qwen2.5-coder-0.5b-instruct")


def _cpu_lora(
    name: str,
    env_id: str,
    *,
    steps: int,
    max_new_tokens: int,
    env_config: dict | None = None,
    lr: float = 2e-5,
    micro_batch_size: int = 8,
    gradient_checkpointing: bool = False,
    max_tokens_per_microbatch: int = 0,
    **rollout: object,
) -> StarPOConfig:
    """A real instruct model + LoRA on a CPU: answer-only turns with the format restated in
    every user message (the 0.5B model drops the tags otherwise), 4 groups × 8 episodes,
    vLLM rollouts with ``rollout.vllm.dtype=auto`` (float32 on a CPU: a bf16 engine rounds
    the LoRA update away, and emulated bf16 is ~13x slower) and a float32 LoRA update.

    Memory (peak RSS under 12 GiB with trainer and engine in one process):
    a 1 GiB KV cache (43k tokens of this model; a Bandit step needs 8.6k, bigger batches
    queue in the engine), for multi-turn envs gradient checkpointing (a float32 0.5B
    model keeps ~2.5 MB of activations per token without it, and one FrozenLake trajectory
    took RSS past 12.9 GiB), and ``trainer.allocator=auto`` (tcmalloc, jemalloc or a fixed
    glibc mmap threshold: a Sokoban step peaks at 9.0-9.5 GiB instead of 13.0 GiB;
    :mod:`ragen_train.allocator`)."""
    r = dict(
        env_groups=4,
        group_size=8,
        max_new_tokens=max_new_tokens,
        enable_think=False,
        format_reminder=True,
        temperature=1.0,
        batch_size=64,
        sampler="vllm",
        vllm=VLLMSection(dtype="auto", kv_cache_gb=1.0),
    )
    r.update(rollout)
    return StarPOConfig(
        name=name,
        model=ModelConfig(
            path=real_model_path(),
            dtype="float32",
            device="cpu",
            gradient_checkpointing=gradient_checkpointing,
            lora=LoraConfig(rank=16, alpha=32, target_modules="all-linear"),
        ),
        env=EnvSection(id=env_id, config=dict(env_config or {})),
        rollout=RolloutSection(**r),  # type: ignore[arg-type]
        algorithm=AlgorithmSection(
            adv_estimator="grpo", entropy_coef=0.0, loss_agg_mode="token-mean"
        ),
        optim=OptimSection(
            lr=lr, micro_batch_size=micro_batch_size, mini_batches=1, ppo_epochs=1, weight_decay=0.0
        ),
        trainer=TrainerSection(
            total_steps=steps,
            val_every=0,
            val_episodes=256,
            val_temperature=0.5,
            save_every=0,
            out_dir=f"outputs/{name}",
            collapse_every=0,
            max_tokens_per_microbatch=max_tokens_per_microbatch,
        ),
    )


_RAGEN2_ALGS: dict[str, dict[str, object]] = {
    "ppo": dict(adv_estimator="gae", loss_agg_mode="token-mean"),
    "dapo": dict(adv_estimator="grpo", loss_agg_mode="token-mean", clip_low=0.2, clip_high=0.28),
    "grpo": dict(adv_estimator="grpo", loss_agg_mode="seq-mean-token-mean"),
    "drgrpo": dict(adv_estimator="dr_grpo", loss_agg_mode="seq-mean-token-sum"),
}
_RAGEN2_ENVS = {
    "sokoban": ("ragen/Sokoban-v0", 5, 2),
    "frozenlake": ("ragen/FrozenLake-v0", 5, 2),
    "countdown": ("ragen/Countdown-v0", 1, 1),
    "metamathqa": ("ragen/MetaMathQA-v0", 1, 1),
}
_RAGEN2_MODELS = {"0.5b": "Qwen/Qwen2.5-0.5B-Instruct", "3b": "Qwen/Qwen2.5-3B-Instruct"}


def _ragen2(alg: str, env: str, size: str) -> StarPOConfig:
    env_id, turns, actions = _RAGEN2_ENVS[env]
    name = f"ragen2-{alg}-{env}-{size}"
    return StarPOConfig(
        name=name,
        # float32 master weights and optimizer state, bfloat16 compute (plain
        # bf16 AdamW at lr 1e-6 rounds most updates away); vLLM samples in bfloat16.
        model=ModelConfig(
            path=_RAGEN2_MODELS[size], dtype="float32", device="cuda", mixed_precision="bf16"
        ),
        env=EnvSection(id=env_id),
        rollout=RolloutSection(
            env_groups=8,
            group_size=16,
            max_turns=turns,
            max_actions_per_turn=actions,
            max_new_tokens=400,
            batch_size=128,
            sampler="vllm",
            vllm=VLLMSection(dtype="bfloat16", gpu_memory_utilization=0.3, max_model_len=3600),
        ),
        algorithm=AlgorithmSection(
            entropy_coef=0.001,
            kl_coef=0.0,
            filter=FilterSection(
                strategy="top_p", value=0.9, top_p_mode="softmax", include_zero=True
            ),
            **_RAGEN2_ALGS[alg],
        ),  # type: ignore[arg-type]
        optim=OptimSection(lr=1e-6, critic_lr=1e-5, micro_batch_size=4, mini_batches=4),
        trainer=TrainerSection(
            total_steps=400,
            val_every=10,
            val_episodes=512,
            val_temperature=0.5,
            save_every=100,
            out_dir=f"outputs/{name}",
        ),
    )


PRESETS: dict[str, Callable[[], StarPOConfig]] = {
    # RAGEN task presets (GPU scale).
    "bandit": lambda: _task("bandit", "ragen/Bandit-v0", turns=1, actions=1, max_new_tokens=500),
    "sokoban": lambda: _task("sokoban", "ragen/Sokoban-Coord-v0", turns=5, actions=2),
    "frozenlake": lambda: _task("frozenlake", "ragen/FrozenLake-Coord-v0", turns=5, actions=2),
    "countdown": lambda: _task("countdown", "ragen/Countdown-v0", turns=1, actions=1),
    "sudoku": lambda: _task("sudoku", "ragen/Sudoku-v0"),
    "metamathqa": lambda: _task("metamathqa", "ragen/MetaMathQA-v0", turns=1, actions=1),
    "deepcoder": lambda: _task(
        "deepcoder", "ragen/DeepCoder-v0", turns=1, actions=1, estimator="grpo", max_new_tokens=2048
    ),
    "webshop": lambda: _task("webshop", "ragen/WebShop-v0", turns=9, actions=1, max_new_tokens=200),
    "searchqa": lambda: _task(
        "searchqa", "ragen/SearchQA-v0", turns=5, actions=1, max_new_tokens=300
    ),
    # Tiny-model presets that learn on a CPU (examples/learning_demo.py).
    "quickstart": lambda: _tiny("quickstart", "ragen/Bandit-PairsAB-v0", "grpo", **_BANDIT),
    "tiny-bandit-grpo": lambda: _tiny(
        "tiny-bandit-grpo", "ragen/Bandit-PairsAB-v0", "grpo", **_BANDIT
    ),
    "tiny-bandit-ppo": lambda: _tiny(
        "tiny-bandit-ppo", "ragen/Bandit-PairsAB-v0", "gae", **_BANDIT
    ),
    "tiny-sokoban-grpo": lambda: _tiny(
        "tiny-sokoban-grpo", "ragen/Sokoban-Easy-v0", "grpo", **_SOKOBAN
    ),
    "tiny-sokoban-ppo": lambda: _tiny(
        "tiny-sokoban-ppo", "ragen/Sokoban-Easy-v0", "gae", **_SOKOBAN
    ),
    # A real local instruct model + LoRA + vLLM rollouts on a CPU (examples/real_model_run.py).
    "cpu-bandit-lora": lambda: _cpu_lora(
        "cpu-bandit-lora", "ragen/Bandit-v0", steps=8, max_new_tokens=24
    ),
    # FrozenLake-v0 (4x4, deterministic, 5 turns x 2 actions): the untrained model's validation
    # success is 0.125 (64 episodes, T 0.5), Sokoban-Easy's 0.  A whole trajectory is one
    # sample of ~600 tokens; 4 groups of 4, and micro-batches of one group, packed into one row
    # under checkpointing (7,267 tokens computed against 11,095 for micro-batches of 1; peak
    # RSS 9.3-9.5 GiB under trainer.allocator=auto, 12.5 GiB with glibc's defaults); lr 5e-5
    # to move in few steps.
    "cpu-frozenlake-lora": lambda: _cpu_lora(
        "cpu-frozenlake-lora",
        "ragen/FrozenLake-v0",
        steps=12,
        max_new_tokens=24,
        env_groups=4,
        group_size=4,
        lr=5e-5,
        micro_batch_size=4,
        batch_size=128,
        gradient_checkpointing=True,
    ),
    # Multi-turn like FrozenLake: checkpointing, and micro-batches capped at 2,048 tokens (a
    # group is packed into one row under checkpointing, whose attention is dense over the
    # row: 1 step peaked at over 14.4 GiB with 4,096, 13.2 GiB with 2,048; docs/training.md).
    "cpu-sokoban-lora": lambda: _cpu_lora(
        "cpu-sokoban-lora",
        "ragen/Sokoban-Easy-v0",
        steps=8,
        max_new_tokens=24,
        gradient_checkpointing=True,
        max_tokens_per_microbatch=2048,
    ),
}
# RAGEN-2 GPU recipes: ragen2-{ppo,dapo,grpo,drgrpo}-{sokoban,frozenlake,countdown,metamathqa}-{0.5b,3b}.
PRESETS.update(
    {
        f"ragen2-{a}-{e}-{m}": (lambda a=a, e=e, m=m: _ragen2(a, e, m))
        for a in _RAGEN2_ALGS
        for e in _RAGEN2_ENVS
        for m in _RAGEN2_MODELS
    }
)
