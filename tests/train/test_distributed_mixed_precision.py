"""Mixed precision that trains: float32 master weights with bfloat16 compute
change the weights as float32 training does, while plain bfloat16 weights with AdamW at a small
learning rate round most updates away (the RAGEN-2 recipes' lr is 1e-6)."""

from __future__ import annotations

import pytest
import torch

from ragen_train import distributed
from ragen_train.config import ModelConfig, TrainConfigError, load_config
from ragen_train.modeling import load_policy, token_logprobs


def _train(dtype: str, mixed: str, steps: int = 3, lr: float = 1e-5) -> tuple[dict, dict, float]:
    torch.manual_seed(0)
    model = distributed.wrap(
        load_policy(ModelConfig(dtype=dtype)), distributed.DistInfo(), "ddp", mixed
    )
    init = {k: v.detach().clone() for k, v in model.state_dict().items()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.0)
    gen = torch.Generator().manual_seed(1)
    ids = torch.randint(3, 200, (4, 12), generator=gen)
    att = torch.ones_like(ids)
    loss = torch.tensor(0.0)
    for _ in range(steps):
        logp, _ = token_logprobs(model, ids, att)
        loss = -logp.mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    return init, model.state_dict(), float(loss.detach())


def _changed(init: dict, now: dict) -> float:
    moved = sum(int((init[k] != now[k]).sum()) for k in init)
    return moved / sum(v.numel() for v in init.values())


def test_bf16_compute_with_fp32_master_weights_trains_like_fp32() -> None:
    i32, w32, loss32 = _train("float32", "none")
    imp, wmp, lossmp = _train("float32", "bf16")
    i16, w16, _ = _train("bfloat16", "none")
    assert all(v.dtype == torch.float32 for v in wmp.values())  # master weights stay fp32
    f32, fmp, f16 = _changed(i32, w32), _changed(imp, wmp), _changed(i16, w16)
    assert f32 > 0.95 and fmp > 0.95, (f32, fmp)
    assert f16 < 0.5 * fmp, f"plain bf16 weights changed {f16:.3f}, mixed {fmp:.3f}"
    assert lossmp == pytest.approx(loss32, rel=2e-2)
    # the compute really was bf16: same start, slightly different weights after the steps
    assert any(not torch.equal(w32[k], wmp[k]) for k in w32)


def test_autocast_forward_computes_in_bf16() -> None:
    model = distributed.wrap(load_policy(ModelConfig()), distributed.DistInfo(), "ddp", "bf16")
    out = model(input_ids=torch.tensor([[5, 6, 7]]))
    assert out.logits.dtype == torch.bfloat16
    assert next(model.parameters()).dtype == torch.float32


def test_mixed_precision_needs_fp32_weights_and_recipes_use_it() -> None:
    with pytest.raises(TrainConfigError, match="model.dtype=float32"):
        load_config("quickstart", ["model.mixed_precision=bf16", "model.dtype=bfloat16"])
    cfg = load_config("ragen2-grpo-sokoban-0.5b", [])
    assert (cfg.model.dtype, cfg.model.mixed_precision) == ("float32", "bf16")
    assert cfg.rollout.vllm.dtype == "bfloat16"
