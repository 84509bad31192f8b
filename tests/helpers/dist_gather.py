"""Weight gathering under FSDP2 for the rollout engine (tests/train/test_distributed.py).

    python -m torch.distributed.run --nproc_per_node 2 tests/helpers/dist_gather.py OUT_DIR

(or the ``gather`` case of ``tests/helpers/dist_update.py``, which shares that launch).
Every rank builds the tiny model with LoRA adapters (rank 4, random ``B`` so the delta is not
zero), computes :func:`ragen_train.rollout_engine.merged_named_weights` of the unsharded copy,
shards it with FSDP2 and computes the same stream again; writes ``gather-rank<r>.pt`` with
both (as the tensors each rank's engine would receive) and the local shard shape of the
embedding.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path

import torch

from ragen_train import distributed
from ragen_train.config import LoraConfig, ModelConfig
from ragen_train.modeling import load_policy
from ragen_train.rollout_engine import merged_named_weights


def gather(out: Path) -> None:
    """This rank's part of the check (joins the launch's process group, or starts one)."""
    info = distributed.init("cpu", 60)
    torch.manual_seed(0)
    model = load_policy(ModelConfig(lora=LoraConfig(rank=4, alpha=8)))
    for name, p in model.named_parameters():
        if "lora_B" in name:
            torch.nn.init.normal_(p, std=0.02)
    full = {n: t.clone() for n, t in merged_named_weights(copy.deepcopy(model))}
    distributed.wrap(model, info, "fsdp2")
    embed = next(p for n, p in model.named_parameters() if "embed_tokens" in n)
    gathered = {n: t.clone() for n, t in merged_named_weights(model)}
    torch.save(
        {"full": full, "gathered": gathered, "local_embed": tuple(embed.to_local().shape)},
        out / f"gather-rank{info.rank}.pt",
    )


def main() -> None:
    gather(Path(sys.argv[1]))
    distributed.shutdown()


if __name__ == "__main__":
    main()
