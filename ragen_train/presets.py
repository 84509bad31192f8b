"""Named training presets (``ragen-train starpo --config <name>``).

Task presets follow RAGEN's task configs where they exist (``config/_1_bandit.yaml``
… ``_10_deepcoder.yaml``; reference section 3.7): 8 env groups × 16 rollouts, PPO with
GAE or GRPO, entropy 0.001, clip 0.2/0.28, lr 1e-6, 400 tokens per turn.  Their model is a
hub id (Qwen/Qwen2.5-0.5B-Instruct; override ``model.path=``).  ``quickstart`` and the
``tiny-*`` presets use the tiny offline model and settings that learn on a laptop CPU in
minutes.
"""

from __future__ import annotations

from collections.abc import Callable

from .config import (
    AlgorithmSection,
    EnvSection,
    FilterSection,
    ModelConfig,
    OptimSection,
    RolloutSection,
    SFTSection,
    StarPOConfig,
    TrainerSection,
)

DEFAULT_HUB_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"


def _task(name: str, env_id: str, *, turns: int | None = None, actions: int | None = None, estimator: str = "gae",
          max_new_tokens: int = 400, **env_config: object) -> StarPOConfig:
    return StarPOConfig(
        name=name,
        model=ModelConfig(path=DEFAULT_HUB_MODEL, dtype="bfloat16", device="cuda"),
        env=EnvSection(id=env_id, config=dict(env_config)),
        rollout=RolloutSection(env_groups=8, group_size=16, max_turns=turns, max_actions_per_turn=actions,
                               max_new_tokens=max_new_tokens, batch_size=128),
        algorithm=AlgorithmSection(adv_estimator=estimator),
        optim=OptimSection(lr=1e-6, critic_lr=1e-5, micro_batch_size=4, mini_batches=4),
        trainer=TrainerSection(total_steps=200, val_every=10, val_episodes=256, save_every=100,
                               out_dir=f"outputs/{name}"),
    )


def _tiny(name: str, env_id: str, estimator: str, *, steps: int, sft_episodes: int, sft_steps: int,
          oracle_fraction: float, lr: float, env_config: dict | None = None, **rollout: object) -> StarPOConfig:
    """Settings with which the tiny model learns on two CPU cores in minutes.

    The tiny model starts from random weights, so the env's rules in the system prompt are
    dead weight: these presets use the minimal system prompt and answer-only responses
    (``<answer>…</answer>``), which also makes each step several times cheaper.
    """
    r = dict(env_groups=8, group_size=8, max_new_tokens=16, context_mode="single_turn", batch_size=64,
             temperature=1.0, enable_think=False, system_prompt="minimal")
    r.update(rollout)
    return StarPOConfig(
        name=name,
        model=ModelConfig(path="tiny", dtype="float32", device="cpu"),
        env=EnvSection(id=env_id, config=dict(env_config or {})),
        rollout=RolloutSection(**r),  # type: ignore[arg-type]
        algorithm=AlgorithmSection(adv_estimator=estimator, entropy_coef=0.0, loss_agg_mode="token-mean",
                                   filter=FilterSection()),
        optim=OptimSection(lr=lr, critic_lr=1e-3, micro_batch_size=64, mini_batches=1, ppo_epochs=1,
                           grad_clip=1.0, weight_decay=0.0),
        sft=SFTSection(demo_policy="mixed", oracle_fraction=oracle_fraction, episodes=sft_episodes,
                       steps=sft_steps, lr=2e-3, batch_size=32, micro_batch_size=32),
        trainer=TrainerSection(total_steps=steps, val_every=5, val_episodes=64, val_temperature=0.5, save_every=10,
                               out_dir=f"outputs/{name}", loggers=["jsonl", "console"], collapse_every=0),
    )


# Bandit: the SFT teacher is the oracle 60% of the time and a uniformly random arm otherwise
# (80% of demonstrations pick the better arm); 120 SFT steps leave the SFT model near chance on held-out pairs and RL something to learn.  Payoffs are
# made deterministic (risky arm pays 1.0 always, steady 0.1): with RAGEN's defaults (1.0 with
# probability 0.25) group-std normalisation gives the better arm a *negative* expected GRPO
# advantage (simulated: -0.34 per group of 8 when half the group picks it; Dr. GRPO's
# unnormalised advantage is +0.26), and 30 steps of 64 single-pull episodes are too few for
# the noise with GRPO even at probability 0.5 (measured 0.58 -> 0.51), while PPO with a critic
# learned that setting (0.58 -> 0.96 held-out success in 30 steps).
_BANDIT = dict(steps=30, sft_episodes=4096, sft_steps=120, oracle_fraction=0.6, lr=2e-4,
               env_config={"risky_prob": 1.0})
# Sokoban-Easy: oracle demonstrations; the tiny model (2 layers, width 128) reaches about 0.3
# held-out success after 640 SFT steps and RL sharpens it.  16 groups of 4 (more distinct
# puzzles per step) learned faster than 8 of 8 in our sweeps.
_SOKOBAN = dict(steps=50, sft_episodes=8192, sft_steps=640, oracle_fraction=1.0, lr=5e-4, env_groups=16, group_size=4)


PRESETS: dict[str, Callable[[], StarPOConfig]] = {
    # RAGEN task presets (GPU scale).
    "bandit": lambda: _task("bandit", "ragen/Bandit-v0", turns=1, actions=1, max_new_tokens=500),
    "sokoban": lambda: _task("sokoban", "ragen/Sokoban-Coord-v0", turns=5, actions=2),
    "frozenlake": lambda: _task("frozenlake", "ragen/FrozenLake-Coord-v0", turns=5, actions=2),
    "countdown": lambda: _task("countdown", "ragen/Countdown-v0", turns=1, actions=1),
    "sudoku": lambda: _task("sudoku", "ragen/Sudoku-v0"),
    "metamathqa": lambda: _task("metamathqa", "ragen/MetaMathQA-v0", turns=1, actions=1),
    "deepcoder": lambda: _task("deepcoder", "ragen/DeepCoder-v0", turns=1, actions=1, estimator="grpo",
                               max_new_tokens=2048),
    "webshop": lambda: _task("webshop", "ragen/WebShop-v0", turns=9, actions=1, max_new_tokens=200),
    "searchqa": lambda: _task("searchqa", "ragen/SearchQA-v0", turns=5, actions=1, max_new_tokens=300),
    # Tiny-model presets that learn on a CPU (examples/learning_demo.py).
    "quickstart": lambda: _tiny("quickstart", "ragen/Bandit-PairsAB-v0", "grpo", **_BANDIT),
    "tiny-bandit-grpo": lambda: _tiny("tiny-bandit-grpo", "ragen/Bandit-PairsAB-v0", "grpo", **_BANDIT),
    "tiny-bandit-ppo": lambda: _tiny("tiny-bandit-ppo", "ragen/Bandit-PairsAB-v0", "gae", **_BANDIT),
    "tiny-sokoban-grpo": lambda: _tiny("tiny-sokoban-grpo", "ragen/Sokoban-Easy-v0", "grpo", **_SOKOBAN),
    "tiny-sokoban-ppo": lambda: _tiny("tiny-sokoban-ppo", "ragen/Sokoban-Easy-v0", "gae", **_SOKOBAN),
}
