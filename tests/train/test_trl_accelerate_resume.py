"""The TRL back-end under ``accelerate launch`` (one CPU
process), checkpointed and resumed with ``--resume latest``; the resumed run ends with the
weights of the uninterrupted one."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("trl", reason="the TRL back-end needs trl (pip install 'ragen[trl]')")
pytest.importorskip(
    "accelerate", reason="accelerate launch needs accelerate (pip install 'ragen[trl]')"
)

ROOT = Path(__file__).resolve().parents[2]
# Entropy bonus: the tiny model's answers are all invalid (equal rewards, zero advantages), so
# without it the weights would not depend on what was sampled and the comparison would be empty.
COMMON = [
    "rollout.env_groups=2",
    "rollout.group_size=2",
    "rollout.max_new_tokens=8",
    "trainer.val_every=0",
    "trainer.save_every=1",
    "trainer.loggers=jsonl",
    "trainer.collapse_every=0",
    "optim.lr=1e-2",
    "algorithm.entropy_coef=0.05",
]


def accelerate_launch(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    cmd = [
        exe,
        "launch",
        "--num_processes",
        "1",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--cpu",
        "-m",
        "ragen_train",
        "starpo",
        "--trainer",
        "trl",
        "--config",
        "quickstart",
        f"trainer.out_dir={out}",
        *COMMON,
        *args,
    ]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)


def weights(model_dir: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(model_dir / "model.safetensors"))


def test_accelerate_launch_trl_run_resumes_to_the_uninterrupted_result(tmp_path: Path) -> None:
    import torch

    whole, split = tmp_path / "whole", tmp_path / "split"
    a = accelerate_launch(whole, "trainer.total_steps=2")
    assert a.returncode == 0, a.stderr[-3000:]
    b = accelerate_launch(split, "trainer.total_steps=1")
    assert b.returncode == 0, b.stderr[-3000:]
    assert (split / "trl" / "checkpoint-1" / "trainer_state.json").is_file()
    c = accelerate_launch(split, "trainer.total_steps=2", "--resume", "latest")
    assert c.returncode == 0, c.stderr[-3000:]
    rows = [json.loads(x) for x in (split / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["phase"]) for r in rows] == [(1, "train"), (2, "train")]
    state = json.loads((split / "trl" / "checkpoint-2" / "trainer_state.json").read_text())
    assert state["global_step"] == 2
    wa, wb = weights(whole / "final_model"), weights(split / "final_model")
    first = weights(split / "checkpoints" / "step_000001" / "model")
    assert any(not torch.equal(first[k], wb[k]) for k in wb), "step 2 changed no weight"
    for k in wa:
        assert torch.allclose(wa[k], wb[k], atol=1e-6), k


def test_resume_without_a_trl_checkpoint_names_the_cause(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In-process (tests/helpers/cli.py): the command fails before any training."""
    import ragen_train.cli
    from tests.helpers.cli import in_process_cli

    code, _, err = in_process_cli(monkeypatch, ragen_train.cli)(
        "starpo",
        "--trainer",
        "trl",
        "--config",
        "quickstart",
        f"trainer.out_dir={tmp_path}",
        "trainer.save_every=0",
        "--resume",
        "latest",
    )
    assert code == 2
    assert "no TRL checkpoint to resume from" in err and "trainer.save_every=0" in err, err
