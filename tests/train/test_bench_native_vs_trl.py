"""``benchmarks/bench_native_vs_trl.py`` runs in both modes: the same replayed batches through
the native trainer and TRL's GRPOTrainer (equal trained tokens per step, asserted by the
script), and each trainer playing its own episodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script

pytest.importorskip("trl", reason="TRL is the `trl` extra (part of `dev`)")


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["replay", "live"])
def test_native_vs_trl_runs_and_reports_both_trainers(mode: str, tmp_path: Path) -> None:
    bench = load_script("benchmarks/bench_native_vs_trl.py")
    out = tmp_path / "r.json"
    args = ["--steps", "2", "--warmup", "0", "--mode", mode, "--json", str(out)]
    args += ["rollout.env_groups=2", "rollout.group_size=4"]
    bench.main(args)
    result = json.loads(out.read_text())
    assert result["mode"] == mode and result["steps"] == 2 and result["episodes_per_step"] == 8
    for name in ("native", "trl_grpo"):
        assert result[name]["steps"] == 2
        assert result[name]["trained_tokens_per_step"] > 0
        assert result[name]["trained_tokens_per_s"] > 0
    if mode == "replay":  # the same records: the same trained tokens
        assert (
            result["native"]["trained_tokens_per_step"]
            == result["trl_grpo"]["trained_tokens_per_step"]
        )
    assert result["ratio_native_over_trl_trained_tokens_per_s"] > 0
