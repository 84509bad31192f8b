"""One StarPO update on a fixed batch; run alone or under torchrun (tests/train/test_distributed.py).

    python tests/helpers/dist_update.py OUT.pt [estimator [key=value ...]]
    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/dist_update.py OUT.pt [estimator [key=value ...]]

Adam's epsilon is raised (1e-3) for this check: with the default 1e-8 the first Adam step
is ``lr * g / |g|`` and turns float noise in near-zero gradients (different summation
order across ranks) into differences of order ``lr``.

Every process builds the same fixed samples (token-exact demonstrations with reward
variance), keeps the groups of its rank (g % world == rank) and runs one update; rank 0
saves the policy's parameters.
"""

from __future__ import annotations

import sys
import tempfile

import torch

from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
from ragen_train import distributed
from ragen_train.batch import build_samples
from ragen_train.config import load_config
from ragen_train.modeling import unwrap
from ragen_train.sft import MixedPolicy, TokenizingPolicy
from ragen_train.trainer import StarPOTrainer


def main() -> None:
    out = sys.argv[1]
    estimator = sys.argv[2] if len(sys.argv) > 2 else "grpo"
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
            *sys.argv[3:],
        ],
    )
    trainer = StarPOTrainer(cfg)
    policy = TokenizingPolicy(MixedPolicy(0.5, seed=7), trainer.tokenizer)
    specs = [
        EpisodeSpec(index=g * 4 + m, env_id="ragen/Bandit-Pairs-v0", seed=g, group=g, member=m)
        for g in range(4)
        for m in range(4)
    ]
    records = RolloutEngine(policy, rollout_config(cfg.env.id, cfg.rollout, temperature=1.0)).run(
        specs
    )
    samples, _ = build_samples(records)
    mine = set(distributed.groups_for_rank(4, trainer.dist))
    local = [
        s for s in samples if s.group in mine
    ]  # one mini-batch: the global batch is the same set
    trainer._update(local, 1.0)
    # FSDP2 holds sharded DTensors: gather every full tensor (a collective) before rank 0 saves.
    state = {
        k: (v.full_tensor() if hasattr(v, "full_tensor") else v).detach().cpu().clone()
        for k, v in unwrap(trainer.model).state_dict().items()
    }
    if trainer.dist.is_main:
        torch.save(state, out)
    trainer.close()
    if torch.distributed.is_initialized():  # close() must leave the process group
        raise SystemExit("StarPOTrainer.close() left the process group initialised")


if __name__ == "__main__":
    main()
