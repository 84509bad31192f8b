"""benchmarks/gpu: the GPU check script runs unchanged on CPU with its tiny config, and the
wheel helper's dependency list covers what the project imports at run time."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks" / "gpu"))


@pytest.mark.timeout(900)
def test_gpu_check_script_runs_on_cpu_with_the_tiny_config(tmp_path: Path) -> None:
    import gpu_check

    out = tmp_path / "gpu.json"
    report = gpu_check.main(["--device", "cpu", "--tiny", "--out", str(out)])
    saved = json.loads(out.read_text())
    assert saved["device"] == "cpu" and saved["sizes"][0]["size"] == "tiny"
    size = report["sizes"][0]
    assert "error" not in size, size.get("traceback")
    assert size["update_tokens_per_s"] > 0 and size["rollout_tokens_per_s"] > 0
    assert size["update_flops_per_s"] == pytest.approx(
        6 * size["params"] * size["update_tokens_per_s"]
    )
    assert size["mfu"] is None  # no peak is known for a CPU
    single = saved["starpo_single_process"]
    assert single["ok"], single.get("traceback")
    assert [s["step"] for s in single["steps"]] == [1, 2, 3]
    assert saved["starpo_fsdp2_world1"]["skipped"] == "GPU only"


def test_gpu_qwen_shapes_match_the_published_parameter_counts() -> None:
    """Qwen2.5-0.5B has 494M parameters and 1.5B 1.54B (Qwen2.5 technical report, table 1)."""
    import gpu_check
    import torch

    for size, expect in (("0.5b", 494e6), ("1.5b", 1.54e9)):
        with torch.device("meta"):
            model = gpu_check.build(size, "meta", torch.bfloat16)
        n = sum(p.numel() for p in model.parameters())
        assert abs(n - expect) / expect < 0.01, (size, n)
