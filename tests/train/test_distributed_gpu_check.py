"""benchmarks/gpu/gpu_check.py: an overall time budget with the JSON written
after every stage, and the vLLM StarPO stage's offline model."""

from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))


def test_a_spent_budget_skips_every_stage_and_still_writes_the_json(tmp_path: Path) -> None:
    import gpu_check

    out = tmp_path / "gpu.json"
    gpu_check.main(["--device", "cpu", "--tiny", "--budget-s", "0", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["sizes"] == [{"ok": None, "skipped": "time budget (0 s) spent", "size": "tiny"}]
    for stage in ("starpo_single_process", "starpo_vllm"):
        assert saved[stage]["skipped"] == "time budget (0 s) spent", stage
    assert saved["settings"]["budget_s"] == 0


def test_vllm_stage_is_skipped_without_vllm_or_gpu(tmp_path: Path) -> None:
    import gpu_check

    got = gpu_check.starpo_vllm("cpu", str(tmp_path), 10)
    assert got["ok"] is None and got["skipped"] in ("vllm is not importable", "GPU only")


def test_vllm_stage_model_has_a_head_size_vllm_takes(tmp_path: Path) -> None:
    import gpu_check
    from transformers import AutoConfig, AutoTokenizer

    path = gpu_check._vllm_model(str(tmp_path))
    cfg = AutoConfig.from_pretrained(path)
    assert cfg.hidden_size // cfg.num_attention_heads == 64
    assert cfg.num_hidden_layers == 2
    assert cfg.vocab_size >= len(AutoTokenizer.from_pretrained(path))
