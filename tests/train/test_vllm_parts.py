"""The parts of the vLLM rollout engine that need no vLLM: LoRA merging for the weight sync,
truncated importance-sampling weights, engine selection, the real-model presets and the
format reminder."""

from __future__ import annotations

import math

import pytest
import torch

from ragen_train.losses import tis_weights
from ragen_train.rollout_engine import (
    SMALL_MODEL_BYTES,
    is_small_model,
    merged_named_weights,
    resolve_sampler,
    sampler_line,
    vllm_available,
)


def test_lora_merged_for_the_sync_equals_peft_merge_and_unload() -> None:
    import copy

    from ragen_train.config import LoraConfig, ModelConfig
    from ragen_train.modeling import apply_lora, load_policy

    base = load_policy(ModelConfig(path="tiny"))
    model = apply_lora(base, LoraConfig(rank=4, alpha=8))
    torch.manual_seed(0)
    with torch.no_grad():
        for n, p in model.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.1)  # B starts at zero: make the adapters do something
    merged = dict(merged_named_weights(model))
    reference = dict(copy.deepcopy(model).merge_and_unload().named_parameters())
    assert set(merged) == set(reference)
    assert not any("lora_" in k or "base_layer" in k for k in merged)
    for k, v in reference.items():
        torch.testing.assert_close(merged[k], v.detach(), rtol=0, atol=1e-6)
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.allclose(
        merged[q], model.get_base_model().model.layers[0].self_attn.q_proj.base_layer.weight
    )
    assert merged_named_weights(model, torch.bfloat16).__next__()[1].dtype == torch.bfloat16


def test_tis_weights_are_the_capped_ratio_inside_the_mask() -> None:
    old = torch.tensor([[-1.0, -2.0, -0.5, -3.0]])
    rollout = torch.tensor([[-1.5, -2.0, -3.0, -1.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    w = tis_weights(old, rollout, cap=2.0, mask=mask)
    assert w.tolist()[0] == pytest.approx(
        [math.exp(0.5), 1.0, 2.0, 1.0]
    )  # e^2.5 capped at 2; outside mask 1
    assert not w.requires_grad
    with pytest.raises(ValueError, match="cap"):
        tis_weights(old, rollout, cap=0.5)
    with pytest.raises(ValueError, match="shapes"):
        tis_weights(old, rollout[:, :2], cap=2.0)


def test_sampler_auto_is_hf_for_tiny_and_vllm_for_real_models_when_installed() -> None:
    assert resolve_sampler("auto", "tiny") == "hf"
    assert resolve_sampler("auto", "/models/qwen") == ("vllm" if vllm_available() else "hf")
    assert resolve_sampler("hf", "/models/qwen") == "hf"
    with pytest.raises(ValueError, match="rollout.sampler"):
        resolve_sampler("sglang", "tiny")


def _weights_folder(path, size: int):
    path.mkdir()
    (path / "config.json").write_text("{}")
    with open(path / "model.safetensors", "wb") as fh:  # sparse: only the size is read
        fh.truncate(size)
    return str(path)


def test_sampler_auto_is_hf_for_a_small_model_folder_even_with_vllm(tmp_path) -> None:
    """A tiny model saved to a folder (``outputs/quickstart/sft_model``) is not the name
    ``tiny``; with vLLM installed ``auto`` used to pick a vLLM engine for it (~70 lines of
    vLLM output per 12 steps, "Failed to load weights" at every sync)."""
    small = _weights_folder(tmp_path / "sft_model", 3_000_000)
    big = _weights_folder(tmp_path / "qwen", SMALL_MODEL_BYTES)
    assert is_small_model(small) and is_small_model("tiny")
    assert not is_small_model(big) and not is_small_model("Qwen/Qwen2.5-0.5B-Instruct")
    assert resolve_sampler("auto", small) == "hf"
    assert resolve_sampler("auto", big) == ("vllm" if vllm_available() else "hf")
    assert resolve_sampler("vllm", small) == "vllm"  # asked for: kept


def test_sampler_choice_is_said_in_one_line(tmp_path) -> None:
    small = _weights_folder(tmp_path / "sft_model", 3_000_000)
    assert sampler_line("auto", "hf", small) == (
        "rollout sampler: hf (rollout.sampler=auto: a small model; rollout.sampler=vllm forces vLLM)"
    )
    assert sampler_line("auto", "vllm", "/m") == (
        "rollout sampler: vllm (rollout.sampler=auto: vLLM is installed and the model is not small)"
    )
    assert sampler_line("vllm", "vllm", small) == "rollout sampler: vllm (rollout.sampler=vllm)"


def test_rollout_engine_vllm_without_vllm_is_a_one_line_config_error(tmp_path) -> None:
    from ragen_train.config import TrainConfigError, apply_overrides, load_config
    from ragen_train.trainer import StarPOTrainer

    if vllm_available():
        pytest.skip("vllm is installed here: the error path cannot be reached")
    cfg = apply_overrides(
        load_config("tiny-bandit-grpo"), ["rollout.sampler=vllm", f"trainer.out_dir={tmp_path}"]
    )
    with pytest.raises(TrainConfigError, match="rollout.sampler.*vllm is not importable"):
        StarPOTrainer(cfg)


def test_fractional_cpu_kv_cache_is_a_one_line_config_error(tmp_path) -> None:
    """vLLM's CPU back-end reads ``VLLM_CPU_KVCACHE_SPACE`` with ``int()``: 0.25 used to end
    in a pydantic traceback from inside vLLM; now the field is named before vLLM starts."""
    from ragen_train.config import TrainConfigError, apply_overrides, load_config
    from ragen_train.trainer import StarPOTrainer

    cfg = apply_overrides(
        load_config("tiny-bandit-grpo"),
        ["rollout.sampler=vllm", "rollout.vllm.kv_cache_gb=0.25", f"trainer.out_dir={tmp_path}"],
    )
    with pytest.raises(TrainConfigError, match="kv_cache_gb.*whole GiB.*kv_cache_gb=1"):
        StarPOTrainer(cfg)


def test_real_model_presets_validate_and_follow_ragen2_recipes() -> None:
    from ragen_train.config import TrainConfigError, apply_overrides, load_config, validate
    from ragen_train.presets import PRESETS

    names = [n for n in PRESETS if n.startswith(("cpu-", "ragen2-"))]
    assert len([n for n in names if n.startswith("ragen2-")]) == 32
    for n in names:
        validate(PRESETS[n]())
    g = PRESETS["ragen2-drgrpo-sokoban-3b"]()
    assert (g.algorithm.adv_estimator, g.algorithm.loss_agg_mode) == (
        "dr_grpo",
        "seq-mean-token-sum",
    )
    assert (g.algorithm.filter.value, g.algorithm.filter.top_p_mode) == (0.9, "softmax")
    assert g.rollout.sampler == "vllm" and g.rollout.vllm.gpu_memory_utilization == 0.3
    c = PRESETS["cpu-bandit-lora"]()
    assert c.model.lora.rank > 0 and c.rollout.format_reminder and c.model.device == "cpu"
    with pytest.raises(TrainConfigError, match="algorithm.tis_cap"):
        apply_overrides(load_config("tiny-bandit-grpo"), ["algorithm.tis_cap=0.5"])


def test_format_reminder_is_the_last_line_of_each_user_message_only_when_on() -> None:
    from ragen_bench.rollout import EpisodeSpec, RolloutConfig, RolloutEngine
    from tests.helpers.scripted import ScriptedPolicy

    for on in (False, True):
        policy = ScriptedPolicy(lambda i, t: "<answer>Left</answer>")
        RolloutEngine(
            policy, RolloutConfig(max_turns=2, enable_think=False, format_reminder=on)
        ).run([EpisodeSpec(index=0, env_id="ragen/FrozenLake-v0", seed=0, group=0)])
        last = policy.requests[0].messages[-1]["content"].splitlines()[-1]
        assert (
            last
            == "Reply with your action(s) inside <answer></answer> tags, e.g. <answer>ACTION</answer>"
        ) == on


def test_vllm_start_hides_modules_its_kernel_scan_cannot_read() -> None:
    """vLLM 0.32's kernel rebinding crashes on llvmlite's ``ffi.lib`` (imported by numba via
    bm25s); the back-end hides it from ``sys.modules`` during import and start-up and puts the
    same module object back afterwards."""
    import sys

    pytest.importorskip("bm25s", reason="bm25s (the search extra) brings numba/llvmlite")
    import bm25s  # noqa: F401

    from ragen_bench.policies.vllm_backend import _UNSCANNABLE_MODULES, _vllm_safe_modules

    if "llvmlite.binding.ffi" not in sys.modules:
        pytest.skip("this bm25s build does not import llvmlite, so there is nothing to hide")
    before = sys.modules["llvmlite.binding.ffi"]
    with _vllm_safe_modules():
        assert not any(name in sys.modules for name in _UNSCANNABLE_MODULES)
        bad = []
        for module in list(sys.modules.values()):
            for value in list(getattr(module, "__dict__", {}).values()):
                if hasattr(value, "__dict__"):
                    try:
                        vars(value).get("kernel")
                    except AttributeError:
                        bad.append(module.__name__)
        assert bad == []  # what vLLM's scan does now succeeds
    assert sys.modules["llvmlite.binding.ffi"] is before


def test_whole_prompt_prefill_sets_a_budget_that_fits_any_prompt(tmp_path) -> None:
    """On vLLM's CPU platform seeded requests need unchunked prefill (see
    ``whole_prompt_prefill``): the step budget is at least the context length, read from the
    model's config when the engine's is not given."""
    import json

    from ragen_bench.policies.vllm_backend import whole_prompt_prefill

    (tmp_path / "config.json").write_text(json.dumps({"max_position_embeddings": 32768}))
    assert whole_prompt_prefill(str(tmp_path), None) == {
        "enable_chunked_prefill": False,
        "max_model_len": 32768,
        "max_num_batched_tokens": 32768,
    }
    assert whole_prompt_prefill(str(tmp_path), 1024) == {
        "enable_chunked_prefill": False,
        "max_num_batched_tokens": 4096,
    }
    assert whole_prompt_prefill(str(tmp_path / "missing"), 8192)["max_num_batched_tokens"] == 8192
