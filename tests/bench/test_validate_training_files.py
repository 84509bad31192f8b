"""``ragen-bench validate`` knows the files ``ragen-train`` writes.

Before: a training ``config.json`` was refused ("cannot tell which schema"), the quickstart
``summary.json`` was checked against the bench run schema (and failed), and a training
output directory was "not a run directory".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
#: The quickstart recipe at the smallest sizes that still write every file (a real run).
TINY = [
    "sft.episodes=32",
    "sft.steps=2",
    "trainer.total_steps=1",
    "trainer.val_episodes=4",
    "trainer.val_every=0",
    "trainer.save_every=1",
    "rollout.env_groups=2",
    "rollout.group_size=2",
]


@pytest.fixture(scope="module")
def train_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("train") / "qs"
    proc = subprocess.run(
        [sys.executable, "-m", "ragen_train.cli", "quickstart", f"trainer.out_dir={out}", *TINY],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


def _validate(*paths: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench", "validate", *map(str, paths)],
        env=ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_validate_recognises_training_outputs(train_dir: Path) -> None:
    proc = _validate(train_dir)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = proc.stdout.splitlines()
    assert f"ok {train_dir / 'config.json'} (train_config, 1 object)" in lines
    assert f"ok {train_dir / 'summary.json'} (train_summary, 1 object)" in lines
    assert any(line.startswith(f"ok {train_dir / 'metrics.jsonl'} (metrics, ") for line in lines)
    assert any(
        line.startswith(f"ok {train_dir / 'sft' / 'metrics.jsonl'} (metrics, ") for line in lines
    )
    for model in ("sft_model", "final_model", "checkpoints/step_000001/model"):
        assert f"ok {train_dir / model / 'ragen_protocol.json'} (agent_protocol, 1 object)" in lines
    single = _validate(
        train_dir / "config.json", train_dir / "summary.json", train_dir / "final_model"
    )
    assert single.returncode == 0, single.stdout
    assert single.stdout.splitlines() == [
        f"ok {train_dir / 'config.json'} (train_config, 1 object)",
        f"ok {train_dir / 'summary.json'} (train_summary, 1 object)",
        f"ok {train_dir / 'final_model' / 'ragen_protocol.json'} (agent_protocol, 1 object)",
    ]


def test_damaged_training_files_are_invalid(train_dir: Path, tmp_path: Path) -> None:
    cfg = json.loads((train_dir / "config.json").read_text())
    cfg["optim"]["lr"] = "fast"
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    summary = json.loads((train_dir / "summary.json").read_text())
    summary["eval_episodes"] = 0
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    proc = _validate(tmp_path / "config.json", tmp_path / "summary.json")
    assert proc.returncode == 1
    out = " ".join(proc.stdout.split())
    assert f"invalid {tmp_path / 'config.json'}: {tmp_path / 'config.json'}: at 'optim/lr'" in out
    assert (
        f"invalid {tmp_path / 'summary.json'}: {tmp_path / 'summary.json'}: at 'eval_episodes'"
        in out
    )
