"""One StarPO update on a fixed batch per case; run alone or under torchrun
(tests/train/test_distributed.py).

    python tests/helpers/dist_update.py OUT_DIR CASE [CASE ...]
    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/dist_update.py OUT_DIR CASE ...

A CASE is ``estimator`` or ``estimator:strategy`` (``grpo:ddp``, ``gae:fsdp2``); every case
runs in this one launch (process startup costs more than the update), each with a fresh
trainer, and rank 0 saves ``OUT_DIR/<estimator>-<strategy>.pt`` (``<estimator>-one.pt`` for
a plain case): the policy's parameters, and the critic's under ``critic.`` for GAE.  The
case ``gather`` (under torchrun) runs :func:`tests.helpers.dist_gather.gather` in the same
launch.

Adam's epsilon is raised (1e-3) for this check: with the default 1e-8 the first Adam step
is ``lr * g / |g|`` and turns float noise in near-zero gradients (different summation
order across ranks) into differences of order ``lr``.

Every process builds the same fixed samples (token-exact demonstrations with reward
variance), keeps the groups of its rank (g % world == rank) and runs one update.
"""

from __future__ import annotations

import gc
import sys
import tempfile
from pathlib import Path
from typing import Any

import torch

from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
from ragen_train import distributed
from ragen_train.batch import build_samples
from ragen_train.config import load_config
from ragen_train.modeling import unwrap
from ragen_train.sft import MixedPolicy, TokenizingPolicy
from ragen_train.trainer import StarPOTrainer


def full_state(module: Any) -> dict[str, torch.Tensor]:
    """Every parameter as a full CPU tensor (FSDP2 DTensors are gathered: a collective)."""
    return {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu().clone()
        for k, v in unwrap(module).state_dict().items()
    }


def run_case(out_dir: Path, estimator: str, strategy: str | None) -> StarPOTrainer:
    """One update of a fresh trainer; rank 0 writes the result file.  Returns the trainer."""
    tmp = tempfile.mkdtemp()
    cfg = load_config(
        "quickstart",
        [
            f"trainer.out_dir={tmp}",
            "trainer.loggers=jsonl",
            "optim.lr=1e-2",
            "optim.adam_eps=1e-3",
            f"algorithm.adv_estimator={estimator}",
            "optim.micro_batch_size=3",
            "optim.mini_batches=1",
            "algorithm.kl_coef=0.05",
            "algorithm.entropy_coef=0.01",
            "algorithm.loss_agg_mode=seq-mean-token-mean",
            *([f"trainer.distributed={strategy}"] if strategy else []),
        ],
    )
    trainer = StarPOTrainer(cfg)
    policy = TokenizingPolicy(MixedPolicy(0.5, seed=7), trainer.tokenizer)
    specs = [
        EpisodeSpec(index=g * 4 + m, env_id="ragen/Bandit-Pairs-v0", seed=g, group=g, member=m)
        for g in range(4)
        for m in range(4)
    ]
    config = rollout_config(cfg.env.id, cfg.rollout, temperature=1.0)
    samples, _ = build_samples(RolloutEngine(policy, config).run(specs))
    mine = set(distributed.groups_for_rank(4, trainer.dist))
    # One mini-batch: the global batch is the same set of groups in every launch.
    trainer._update([s for s in samples if s.group in mine], 1.0)
    state = full_state(trainer.model)
    if trainer.critic is not None:
        state |= {f"critic.{k}": v for k, v in full_state(trainer.critic).items()}
    if trainer.dist.is_main:
        torch.save(state, out_dir / f"{estimator}-{strategy or 'one'}.pt")
    return trainer


def run_cases(out_dir: Path, cases: list[str]) -> None:
    """Every case of ``cases`` in order (``gather``: :func:`tests.helpers.dist_gather.gather`),
    then leave the process group (``StarPOTrainer.close()``).

    Raises:
        SystemExit: ``close()`` left the process group initialised.
    """
    trainer = None
    for case in cases:
        if case == "gather":
            from tests.helpers.dist_gather import gather

            gather(out_dir)
            continue
        estimator, strategy = case.partition(":")[::2]
        if trainer is not None:  # free the previous case's wrapped models before the next
            del trainer
            gc.collect()
        trainer = run_case(out_dir, estimator, strategy or None)
    if trainer is not None:
        trainer.close()
    else:
        distributed.shutdown()
    if torch.distributed.is_initialized():  # close() must leave the process group
        raise SystemExit("StarPOTrainer.close() left the process group initialised")


def main() -> None:
    run_cases(Path(sys.argv[1]), sys.argv[2:])


if __name__ == "__main__":
    main()
