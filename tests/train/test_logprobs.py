"""The shared-prefix / padded update paths and the chunked LM head give the
plain path's log-probs, entropies and gradients (fp32 tolerance), on the tiny model and on a
randomly initialised 2-layer Qwen2; micro-batch planning by count and by token budget."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
import torch

from ragen_train.batch import Sample, collate
from ragen_train.config import LoraConfig
from ragen_train.logprobs import (
    Unit,
    common_prefix,
    linear_logprob_entropy,
    logits_logprob_entropy,
    micro_batch_cost,
    micro_logprobs,
    packs_prefix,
    plan_micro_batches,
)
from ragen_train.modeling import apply_lora, token_logprobs


def _sample(prompt: list[int], completion: list[int], group: int, member: int) -> Sample:
    n = len(prompt) + len(completion)
    return Sample(
        input_ids=prompt + completion,
        loss_mask=[0] * len(prompt) + [1] * len(completion),
        turn_ids=[-1] * len(prompt) + [0] * len(completion),
        rewards=[0.0] * n,
        rollout_logprobs=None,
        score=0.0,
        group=group,
        episode=member,
    )


def _samples(vocab: int, seed: int = 0) -> list[Sample]:
    """Three groups of four sharing a prompt (lengths vary), completions of 1-6 tokens; in
    group 0 two completions start alike (the common prefix reaches into the response); a
    singleton group; a multi-turn-like sample with an untrained observation inside."""
    rng = random.Random(seed)
    tok = lambda: rng.randrange(3, vocab)  # noqa: E731
    out: list[Sample] = []
    for g in range(3):
        prompt = [tok() for _ in range(rng.randrange(5, 12))]
        for m in range(4):
            comp = [tok() for _ in range(rng.randrange(1, 7))]
            if g == 0 and m in (1, 2):
                comp = [7, 8] + comp
            out.append(_sample(prompt, comp, g, m))
    out.append(_sample([tok() for _ in range(9)], [tok() for _ in range(4)], 3, 0))
    s = _sample([tok() for _ in range(6)], [tok() for _ in range(3)], 4, 0)
    obs = [tok() for _ in range(4)]
    s.input_ids += obs + [5, 6]
    s.loss_mask += [0] * len(obs) + [1, 1]
    s.turn_ids += [-1] * len(obs) + [1, 1]
    s.rewards += [0.0] * (len(obs) + 2)
    out.append(s)
    return out


def _qwen2(tie: bool) -> torch.nn.Module:
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(0)
    cfg = Qwen2Config(
        vocab_size=300,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        tie_word_embeddings=tie,
    )
    return Qwen2ForCausalLM(cfg).float()


def _tiny_lora(checkpointing: bool = False) -> torch.nn.Module:
    from transformers import AutoModelForCausalLM

    from ragen_bench.tiny import tiny_model_path

    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_model_path()), dtype=torch.float32)
    if checkpointing:  # the order of ragen_train.modeling.load_policy
        model.gradient_checkpointing_enable()
    model = apply_lora(model, LoraConfig(rank=4, alpha=8, target_modules="all-linear"))
    for name, p in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero: give the adapters a non-trivial value
            torch.nn.init.normal_(p, std=0.2)
    return model


def _loss_and_grads(model, lp, ent, adv, mask):
    loss = ((lp * adv + 0.3 * ent) * mask).sum()
    params = [p for p in model.parameters() if p.requires_grad]
    return torch.autograd.grad(loss, params)


@pytest.mark.parametrize(
    "which,path,max_tokens",
    [
        ("qwen2-tied", "shared_prefix", 0),
        ("qwen2-untied", "shared_prefix", 40),
        ("qwen2-untied", "padded", 0),
        ("tiny-lora", "shared_prefix", 0),
        ("tiny-lora", "padded", 60),
        # gradient checkpointing: shared_prefix packs each unit into one row
        ("qwen2-tied", "shared_prefix-ckpt", 0),
        ("qwen2-untied", "shared_prefix-ckpt", 40),
        ("tiny-lora", "shared_prefix-ckpt", 0),
    ],
)
def test_fast_paths_equal_plain_logprobs_entropies_and_gradients(
    which: str, path: str, max_tokens: int
) -> None:
    ckpt = path.endswith("-ckpt")
    path = path.removesuffix("-ckpt")
    if which == "tiny-lora":
        model = _tiny_lora(checkpointing=ckpt)
    else:
        model = _qwen2(tie=which == "qwen2-tied")
        if ckpt:
            model.gradient_checkpointing_enable()
    assert packs_prefix(model) == ckpt
    model.train()
    vocab = model.config.vocab_size
    samples = _samples(vocab)
    batch = collate(samples, 0)
    width = batch.loss_mask.shape[1]
    adv = torch.randn(len(samples), width, generator=torch.Generator().manual_seed(1))
    temp = 0.7
    lp0, ent0 = token_logprobs(
        model, batch.input_ids, batch.attention_mask, temperature=temp, with_entropy=True
    )
    mask = batch.loss_mask
    g0 = _loss_and_grads(model, lp0, ent0, adv, mask)

    micro = plan_micro_batches(
        samples,
        list(range(len(samples))),
        share_prefix=path == "shared_prefix",
        max_samples=5,
        max_tokens=max_tokens,
        packed=ckpt,
    )
    assert sorted(r for mb in micro for r in mb.rows) == list(range(len(samples)))
    if max_tokens:
        assert all(
            micro_batch_cost(samples, mb.units, ckpt) <= max_tokens
            for mb in micro
            if len(mb.rows) > 1
        )
    if path == "shared_prefix":
        # group 0's prefix reaches its first trained token; one prefix pass serves many rows
        assert any(len(u.rows) > 1 for mb in micro for u in mb.units)
    lp = torch.zeros_like(lp0)
    ent = torch.zeros_like(ent0)
    loss_parts = []
    for mb in micro:
        rows = mb.rows
        got_lp, got_ent = micro_logprobs(
            model, samples, mb, width=width, pad_id=0, temperature=temp, with_entropy=True
        )
        lp[rows], ent[rows] = got_lp.detach(), got_ent.detach()
        loss_parts.append(((got_lp * adv[rows] + 0.3 * got_ent) * mask[rows]).sum())
    params = [p for p in model.parameters() if p.requires_grad]
    g1 = torch.autograd.grad(sum(loss_parts), params)

    assert torch.allclose(lp, lp0 * mask, atol=2e-5, rtol=0)
    assert torch.allclose(ent, ent0 * mask, atol=2e-5, rtol=0)
    assert (lp[mask == 0] == 0).all()  # nothing computed outside the trained positions
    scale = max(float(g.abs().max()) for g in g0)
    assert scale > 1e-3  # the gradient is not trivially zero
    for a, b in zip(g0, g1):
        assert torch.allclose(a, b, atol=1e-5 * scale, rtol=1e-4)


@pytest.mark.parametrize("temperature,chunk", [(1.0, 7), (0.6, 64), (1.3, 1000)])
def test_chunked_head_equals_full_logits_values_and_gradients(
    temperature: float, chunk: int
) -> None:
    gen = torch.Generator().manual_seed(0)
    h = torch.randn(11, 16, generator=gen, requires_grad=True)
    w = torch.randn(50, 16, generator=gen, requires_grad=True)
    b = torch.randn(50, generator=gen, requires_grad=True)
    y = torch.randint(0, 50, (11,), generator=gen)
    c1, c2 = torch.randn(11, generator=gen), torch.randn(11, generator=gen)
    lp, ent = linear_logprob_entropy(h, w, y, bias=b, temperature=temperature, chunk=chunk)
    g = torch.autograd.grad((lp * c1 + ent * c2).sum(), (h, w, b))
    lp0, ent0 = logits_logprob_entropy(h @ w.t() + b, y, temperature)
    g0 = torch.autograd.grad((lp0 * c1 + ent0 * c2).sum(), (h, w, b))
    assert torch.allclose(lp, lp0, atol=1e-5) and torch.allclose(ent, ent0, atol=1e-5)
    for a, e in zip(g, g0):
        assert torch.allclose(a, e, atol=1e-5)
    # only the log-prob used: the entropy branch of the backward is skipped, same gradient
    (gh,) = torch.autograd.grad(
        linear_logprob_entropy(h, w, y, temperature=temperature, chunk=chunk)[0].sum(), (h,)
    )
    (gh0,) = torch.autograd.grad(logits_logprob_entropy(h @ w.t(), y, temperature)[0].sum(), (h,))
    assert torch.allclose(gh, gh0, atol=1e-5)


def test_chunked_head_with_no_positions_still_connects_the_graph() -> None:
    """A dummy micro-batch trains nothing: zero gradients, but every parameter gets one (DDP)."""
    h = torch.randn(0, 8, requires_grad=True)
    w = torch.randn(20, 8, requires_grad=True)
    lp, ent = linear_logprob_entropy(h, w, torch.zeros(0, dtype=torch.long))
    (lp.sum() + ent.sum()).backward()
    assert w.grad is not None and float(w.grad.abs().sum()) == 0.0


def test_common_prefix_and_cost() -> None:
    assert common_prefix([[1, 2, 3], [1, 2, 4], [1, 2]]) == 2
    assert common_prefix([[5], [6]]) == 0
    s = [_sample([1, 2, 3, 4], [9], 0, 0), _sample([1, 2, 3, 4], [8, 8, 8], 0, 1)]
    # one prefix row of 4 + two suffix rows of 3 (the longer suffix: 7 - 4)
    assert micro_batch_cost(s, [Unit((0, 1), 4)]) == 4 + 2 * 3
    assert micro_batch_cost(s, [Unit((0,), 0), Unit((1,), 0)]) == 2 * 7
    # packed: one row, the prefix once then both suffixes (4 + 1 + 3)
    assert micro_batch_cost(s, [Unit((0, 1), 4)], packed=True) == 8


@pytest.mark.parametrize("ckpt,calls", [(False, 2), (True, 1)])
def test_shared_prefix_makes_the_same_number_of_model_calls_for_every_micro_batch(
    ckpt: bool, calls: int
) -> None:
    """Two calls (prefix, suffixes) per micro-batch, or one packed call under gradient
    checkpointing; never a number that depends on the samples (DDP stays in step)."""
    model = _qwen2(tie=False)
    if ckpt:
        model.gradient_checkpointing_enable()
    model.train()
    samples = _samples(300, seed=2)
    seen: list[int] = []
    decoder = model.model
    handle = decoder.register_forward_hook(lambda _m, _i, _o: seen.append(1))
    try:
        micro = plan_micro_batches(
            samples, list(range(len(samples))), share_prefix=True, max_samples=4, packed=ckpt
        )
        for mb in micro:
            seen.clear()
            micro_logprobs(model, samples, mb, width=40, pad_id=0)
            assert len(seen) == calls
    finally:
        handle.remove()


def test_token_budget_bounds_every_micro_batch_that_holds_more_than_one_sample() -> None:
    samples = _samples(300, seed=4)
    rows = list(range(len(samples)))
    for budget in (30, 60, 200):
        micro = plan_micro_batches(
            samples, rows, share_prefix=True, max_samples=1, max_tokens=budget
        )
        assert sorted(r for mb in micro for r in mb.rows) == rows
        for mb in micro:
            assert len(mb.rows) == 1 or micro_batch_cost(samples, mb.units) <= budget
    by_count = plan_micro_batches(samples, rows, share_prefix=False, max_samples=4)
    assert [len(mb.rows) for mb in by_count] == [4, 4, 4, 2]
    with pytest.raises(ValueError, match="max_samples"):
        plan_micro_batches(samples, rows, share_prefix=True, max_samples=0)


def test_shared_prefix_computes_at_least_4x_fewer_tokens_on_a_bandit_like_step() -> None:
    """The shape of the issue's measurement: 250-token prompts shared by groups of 8, 24-token
    responses; micro-batches of 8 (one group each)."""
    rng = random.Random(0)
    samples = []
    for g in range(4):
        prompt = [rng.randrange(3, 300) for _ in range(250)]
        for m in range(8):
            samples.append(_sample(prompt, [rng.randrange(3, 300) for _ in range(24)], g, m))
    rows = list(range(len(samples)))
    shared = plan_micro_batches(samples, rows, share_prefix=True, max_samples=8)
    padded = plan_micro_batches(samples, rows, share_prefix=False, max_samples=8)
    cost_shared = sum(micro_batch_cost(samples, mb.units) for mb in shared)
    cost_padded = sum(micro_batch_cost(samples, mb.units) for mb in padded)
    assert cost_padded == 32 * 274
    assert cost_padded / cost_shared >= 4.0


@pytest.mark.slow
def test_trainer_update_paths_give_the_same_parameters(tmp_path: Path) -> None:
    """One real `_update` (GRPO + KL + entropy bonus) from the same weights with
    `trainer.update_path=plain`, `shared_prefix` (by count and by a token budget) and `padded`:
    the same new parameters; the fast paths compute fewer tokens."""
    from ragen_train.config import load_config
    from ragen_train.trainer import StarPOTrainer

    from .test_trainer import mixed_samples

    params = {}
    processed = {}
    runs = {
        "plain": ("plain", 0),
        "shared_prefix": ("shared_prefix", 0),
        "budget": ("shared_prefix", 120),
        "padded": ("padded", 0),
        "checkpointed": ("shared_prefix", 0),  # gradient checkpointing: units packed
    }
    for run, (path, budget) in runs.items():
        cfg = load_config(
            "quickstart",
            [
                f"trainer.out_dir={tmp_path / run}",
                "trainer.loggers=jsonl",
                "rollout.group_size=4",
                "optim.lr=1e-2",
                "optim.adam_eps=1e-3",
                "optim.micro_batch_size=4",
                "algorithm.kl_coef=0.05",
                "algorithm.entropy_coef=0.01",
                f"trainer.update_path={path}",
                f"trainer.max_tokens_per_microbatch={budget}",
                f"model.gradient_checkpointing={run == 'checkpointed'}",
            ],
        )
        torch.manual_seed(0)
        trainer = StarPOTrainer(cfg)
        assert trainer.update_path == path
        assert packs_prefix(trainer.model) == (run == "checkpointed")
        samples = mixed_samples(trainer)
        metrics = trainer._update(samples, 1.0)
        assert metrics["actor/grad_norm"] > 0  # a real gradient, not a trivially equal zero
        processed[run] = metrics["update/tokens_processed"]
        params[run] = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    assert processed["shared_prefix"] < processed["padded"] < processed["plain"]
    assert processed["checkpointed"] < processed["padded"]
    for run in ("shared_prefix", "budget", "padded", "checkpointed"):
        for name, p in params["plain"].items():
            assert torch.allclose(p, params[run][name], atol=1e-5, rtol=0), (run, name)


@pytest.mark.parametrize("share,ckpt", [(True, False), (False, False), (True, True)])
def test_a_sample_without_trained_tokens_gives_zero_but_connected_gradients(
    share: bool, ckpt: bool
) -> None:
    """The trainer's `_dummy_sample` (two pad tokens, nothing trained) on a rank without data:
    the forward runs, every trainable parameter receives a (zero) gradient, nothing is NaN."""
    model = _qwen2(tie=False)
    if ckpt:
        model.gradient_checkpointing_enable()
        model.train()
    dummy = Sample([0, 0], [0, 0], [-1, -1], [0.0, 0.0], None, 0.0, -1, -1)
    (mb,) = plan_micro_batches([dummy], [0], share_prefix=share, max_samples=1)
    lp, ent = micro_logprobs(model, [dummy], mb, width=1, pad_id=0, with_entropy=True)
    assert lp.shape == (1, 1) and float(lp.abs().sum()) == 0.0
    (lp.sum() + ent.sum()).backward()
    grads = [p.grad for p in model.parameters()]
    assert all(
        g is not None and torch.isfinite(g).all() and float(g.abs().sum()) == 0 for g in grads
    )
