"""The agent protocol travels with a saved model and ``ragen-bench run`` uses it.

Before: ``ragen-bench run --policy hf --model outputs/quickstart/final_model`` played with the
harness defaults (think on, full system prompt, 256 tokens) and scored 0% format-valid on a
model trained answer-only with the minimal prompt, while ``ragen-train eval`` gave 100%.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_bench.protocol import PROTOCOL_FILE, read_protocol
from ragen_bench.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def saved_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny model saved the way the trainer saves ``final_model`` (quickstart config)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from ragen_bench.tiny import tiny_model_path
    from ragen_train.checkpoint import save_model
    from ragen_train.presets import PRESETS

    src = tiny_model_path()
    out = tmp_path_factory.mktemp("qs") / "final_model"
    save_model(
        AutoModelForCausalLM.from_pretrained(src),
        AutoTokenizer.from_pretrained(src),
        out,
        config=PRESETS["quickstart"]().to_dict(),
    )
    return out


def _bench(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench", "run", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_every_saved_model_carries_the_eval_protocol(saved_model: Path) -> None:
    from ragen_train.evaluation import plan_eval, saved_protocol
    from ragen_train.presets import PRESETS

    assert (saved_model / PROTOCOL_FILE).is_file()
    assert validate_file(saved_model / PROTOCOL_FILE) == ("agent_protocol", 1)
    protocol = read_protocol(saved_model)
    assert protocol == saved_protocol(PRESETS["quickstart"]().to_dict()).__class__(
        **{
            **saved_protocol(PRESETS["quickstart"]().to_dict()).__dict__,
            "path": saved_model / PROTOCOL_FILE,
        }
    )
    assert protocol.env_id == "ragen/Bandit-PairsAB-v0" and protocol.env_config == {
        "risky_prob": 1.0
    }
    assert (
        protocol.rollout["enable_think"] is False and protocol.rollout["system_prompt"] == "minimal"
    )
    assert protocol.rollout["sampling"] == {"temperature": 0.5, "top_p": 1.0, "max_new_tokens": 16}
    # ...and it is exactly what `ragen-train eval` plays with (its config.json is not next to this model)
    (saved_model.parent / "config.json").write_text(json.dumps(PRESETS["quickstart"]().to_dict()))
    try:
        plan = plan_eval(saved_model)
    finally:
        (saved_model.parent / "config.json").unlink()
    assert plan.rollout == protocol.rollout and plan.env_config == protocol.env_config
    assert plan.split == protocol.split and plan.env_id == protocol.env_id


def test_bench_run_uses_the_saved_protocol_and_warns_at_zero_format_valid(
    saved_model: Path, tmp_path: Path
) -> None:
    proc = _bench(
        "--backend",
        "hf",
        "--model",
        str(saved_model),
        "--env",
        "ragen/Bandit-PairsAB-v0",
        "--episodes",
        "4",
        "--max-new-tokens",
        "8",
        "--out",
        "runs",
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert f"agent protocol from {saved_model / PROTOCOL_FILE}" in proc.stderr
    assert "think off, system prompt minimal" in proc.stderr and "--max-new-tokens" in proc.stderr
    run = json.loads(next((tmp_path / "runs").glob("*/run.json")).read_text())
    r = run["rollout"]
    assert (r["enable_think"], r["system_prompt"], r["context_mode"]) == (
        False,
        "minimal",
        "single_turn",
    )
    assert r["sampling"]["max_new_tokens"] == 8  # the command line wins over the protocol's 16
    assert r["sampling"]["temperature"] == 0.5
    assert run["env_config"] == {"split": "test", "risky_prob": 1.0}
    summary = json.loads(next((tmp_path / "runs").glob("*/summary.json")).read_text())
    if summary["metrics"]["format_valid_rate"]["mean"] == 0:  # the untrained tiny model: expected
        assert "WARNING: format-valid rate is 0%" in " ".join(proc.stderr.split())


def test_env_defaults_to_the_trained_env_and_other_env_drops_its_limits(
    saved_model: Path, tmp_path: Path
) -> None:
    from ragen_bench.protocol import apply_protocol
    from ragen_bench.runner import RunRequest

    proc = _bench(
        "--backend",
        "hf",
        "--model",
        str(saved_model),
        "--episodes",
        "2",
        "--out",
        "runs",
        "--no-progress",
        "--json",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["env"]["ids"] == ["ragen/Bandit-PairsAB-v0"]
    req = RunRequest(
        env_id="ragen/Sokoban-Easy-v0",
        backend="hf",
        model=str(saved_model),
        rollout={"max_turns": None, "sampling": {}},
    )
    applied = apply_protocol(req, set())
    assert applied.request.rollout["max_turns"] is None and applied.request.env_config is None
    assert applied.request.rollout["enable_think"] is False
    assert "not the env the model was trained on" in applied.notes[0]


def test_zero_format_valid_warning_without_a_protocol() -> None:
    from ragen_bench.protocol import format_valid_warning

    summary = {"metrics": {"format_valid_rate": {"mean": 0.0}}, "episodes": {"scored": 8}}
    assert "--think/--no-think" in format_valid_warning(summary)
    assert format_valid_warning({"metrics": {"format_valid_rate": {"mean": 0.25}}}) is None
