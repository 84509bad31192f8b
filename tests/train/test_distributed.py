"""torchrun with 2 CPU processes (gloo) gives the same parameters after one update as one
process with the same global batch, with DDP and with FSDP2 (``fully_shard`` on CPU)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[1] / "helpers" / "dist_update.py"


def run(cmd: list[str], cwd: Path) -> None:
    # PYTHONFAULTHANDLER: a rank that aborts prints every thread's Python stack, so a failure
    # says where it happened (torchrun's summary alone fills the last 4,000 characters).
    env = {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
        "PYTHONPATH": str(SCRIPT.parents[2]),
    }
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[:6000] + "\n[...]\n" + proc.stderr[-3000:]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("estimator", "strategy"),
    [("grpo", "ddp"), ("gae", "ddp"), ("grpo", "fsdp2"), ("gae", "fsdp2")],
)
def test_two_processes_match_one(tmp_path: Path, estimator: str, strategy: str) -> None:
    one, two = tmp_path / "one.pt", tmp_path / "two.pt"
    run([sys.executable, str(SCRIPT), str(one), estimator], tmp_path)
    run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            "--standalone",
            str(SCRIPT),
            str(two),
            estimator,
            f"trainer.distributed={strategy}",
        ],
        tmp_path,
    )
    a, b = torch.load(one), torch.load(two)
    assert a.keys() == b.keys()
    from transformers import AutoModelForCausalLM

    from ragen_bench.tiny import tiny_model_path

    init = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
    moved = 0
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-4), (
            f"{k}: max diff {(a[k] - b[k]).abs().max()}"
        )
        moved += not torch.equal(a[k], init[k])
    assert moved == len(a), "every parameter must have moved (the comparison is not vacuous)"
