"""``benchmarks/bench_update.py`` replays the same samples through two update
paths and writes their tokens, FLOPs, times and the difference of the updated parameters."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.scripts import load_script


def _bench():
    return load_script("benchmarks/bench_update.py")


@pytest.mark.slow
def test_bench_update_replays_the_same_samples_through_both_paths(tmp_path: Path) -> None:
    bench = _bench()
    out, replay = tmp_path / "u.json", tmp_path / "samples.json"
    args = [
        "--preset", "quickstart", "--steps", "1", "--out", str(out), "--samples", str(replay),
        "--warmup", "0", "rollout.group_size=4", "rollout.env_groups=2",
    ]  # fmt: skip
    assert bench.main(args) == 0
    first = json.loads(out.read_text())
    assert replay.exists()
    assert bench.main(args) == 0  # the second run replays the written samples
    again = json.loads(out.read_text())
    fast, plain = first["paths"]["shared_prefix"], first["paths"]["plain"]
    assert fast["tokens_trained"] == plain["tokens_trained"] > 0
    assert plain["tokens_processed"] > fast["tokens_processed"]
    assert first["vs_plain"]["shared_prefix"]["flops_ratio"] > 1
    assert plain["max_param_diff_vs_shared_prefix"] < 1e-5
    assert again["paths"]["plain"]["tokens_processed"] == plain["tokens_processed"]
    assert first["matmul_peak_gflops"] > 0


def test_bench_update_refuses_bad_arguments(capsys: pytest.CaptureFixture[str]) -> None:
    assert _bench().main(["--steps", "0"]) == 2
    assert "--steps must be >= 1" in capsys.readouterr().err


def test_bench_update_sampler_flag_and_its_deprecated_engine_alias(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``--sampler`` sets ``rollout.sampler`` (a bad value is the config's one-line error);
    the old ``--engine`` still does, with one ``warning:`` line, and is hidden from --help."""
    bench = _bench()
    assert bench.main(["--preset", "quickstart", "--sampler", "sglang"]) == 2
    err = capsys.readouterr().err
    assert "rollout.sampler" in err and "sglang" in err and "warning" not in err
    assert bench.main(["--preset", "quickstart", "--engine", "sglang"]) == 2
    err = capsys.readouterr().err
    assert "warning: --engine is deprecated" in err and "use --sampler sglang" in err
    assert "rollout.sampler" in err and "sglang" in err.split("error:", 1)[1]
    assert bench.main(["--sampler", "hf", "--engine", "vllm"]) == 2
    assert "disagree; use --sampler" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--help"])
    out = capsys.readouterr().out
    assert "--sampler" in out and "--engine" not in out
