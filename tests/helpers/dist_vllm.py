"""One StarPO step with the colocated vLLM sampler; run alone or under torchrun
(tests/train/test_fsdp2_vllm.py).

    python tests/helpers/dist_vllm.py OUT_DIR MODEL_DIR [OVERRIDE ...]
    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/dist_vllm.py OUT_DIR MODEL_DIR \
        trainer.distributed=fsdp2 [OVERRIDE ...]

The run (``trainer.out_dir=OUT_DIR/run``) validates before training, takes one step (rollout,
update, weight sync into every rank's engine) and validates again, then saves
``final_model``.  Every episode the trainer plays goes through
``StarPOTrainer.sampler.play_seeded`` (training rollouts and validation alike); each rank writes the
ones it played to ``OUT_DIR/episodes-w<world>-r<rank>.json``: a list of
``{"phase", "step", "env", "index", "group", "member", "seed", "turns": [{"turn", "ids",
"actions"}]}`` (``ids``: the sampled completion token ids).  The one-process run also
checks the engine's weight check (:func:`sync_checks`, ``OUT_DIR/checks.json``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: The weight the engine's sync check reads (repacked by vLLM's CPU back-end).
LAYER = "model.layers.1.mlp.down_proj.weight"
#: The run's settings (before the command line's overrides): a float32 engine (so the sync
#: check is exact; `auto` is bfloat16 on CPUs with native bf16), 2 groups of 2 on the bandit,
#: up to 2 turns (a random model's answers are invalid, so an episode plays both), 8 validation
#: episodes in chunks of 4 (one chunk per rank on 2 ranks) at temperature 1.
SETTINGS = [
    "model.dtype=float32",
    "rollout.sampler=vllm",
    "rollout.vllm.kv_cache_gb=1",
    "rollout.vllm.dtype=float32",
    "rollout.env_groups=2",
    "rollout.group_size=2",
    "rollout.max_turns=2",
    "rollout.max_new_tokens=8",
    "rollout.batch_size=4",
    "optim.micro_batch_size=4",
    "optim.lr=5e-3",
    "algorithm.entropy_coef=0.05",
    "trainer.total_steps=1",
    "trainer.val_every=1",
    "trainer.val_before_train=true",
    "trainer.val_episodes=8",
    "trainer.val_temperature=1.0",
    "trainer.save_every=0",
    "trainer.collapse_every=0",
    "trainer.loggers=jsonl",
    "trainer.dist_timeout_s=300",
]


def episode_rows(phase: str, step: int, parts: list[list[Any]]) -> list[dict[str, Any]]:
    """What each episode of ``parts`` (``[env][i]`` records) sampled, as JSON rows."""
    return [
        {
            "phase": phase,
            "step": step,
            "env": e,
            "index": rec.episode_index,
            "group": rec.group,
            "member": rec.member,
            "seed": rec.seed,
            "turns": [
                {"turn": t.turn, "ids": t.completion_token_ids, "actions": t.actions}
                for t in rec.turns
            ],
        }
        for e, part in enumerate(parts)
        for rec in part
    ]


def play(out_dir: Path, model: str, overrides: list[str]) -> Any:
    """Build the trainer, ``fit`` it (recording every episode it plays), write the rank's
    episode file; returns the trainer (not closed)."""
    from ragen_train.config import load_config
    from ragen_train.trainer import StarPOTrainer

    cfg = load_config(
        "tiny-bandit-grpo",
        [f"model.path={model}", *SETTINGS, f"trainer.out_dir={out_dir / 'run'}", *overrides],
    )
    trainer = StarPOTrainer(cfg)
    rows: list[dict[str, Any]] = []
    play_seeded = trainer.sampler.play_seeded

    def recorded(specs, configs, keys, by, progress=None):  # the real method, its result kept
        parts = play_seeded(specs, configs, keys, by, progress)
        phase, step = keys[0][0], keys[0][1]
        rows.extend(episode_rows(phase, trainer.step if phase != "train" else step, parts))
        return parts

    trainer.sampler.play_seeded = recorded
    trainer.fit()
    d = trainer.dist
    path = out_dir / f"episodes-w{d.world_size}-r{d.rank}.json"
    path.write_text(json.dumps(rows))
    return trainer


def sync_checks(engine: Any, model_dir: str) -> dict[str, Any]:
    """The engine's weight check (``VLLMRolloutEngine.check_weights``) on CPU-repacked
    weights: ``synced_err`` after syncing the model with :data:`LAYER` moved by 0.5,
    ``perturbed_err`` for an expectation off by 1e-3, ``shard_error`` for a shard."""
    import torch
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    with torch.no_grad():
        model.get_parameter(LAYER).add_(0.5)
    out: dict[str, Any] = {"synced_err": engine.sync_weights(model)["sync/max_abs_err"]}
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    weights[LAYER] += 1e-3
    out["perturbed_err"] = engine.check_weights(weights)
    weights[LAYER] = weights[LAYER][:64]
    try:
        engine.check_weights(weights)
        out["shard_error"] = ""
    except RuntimeError as exc:
        out["shard_error"] = str(exc)
    return out


def main() -> None:
    out_dir, model = Path(sys.argv[1]), sys.argv[2]
    trainer = play(out_dir, model, sys.argv[3:])
    if trainer.dist.world_size == 1:
        checks = sync_checks(trainer.vllm_engine, model)
        (out_dir / "checks.json").write_text(json.dumps(checks))
    trainer.close()


if __name__ == "__main__":
    main()
