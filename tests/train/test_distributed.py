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


ESTIMATORS = ("grpo", "gae")
STRATEGIES = ("ddp", "fsdp2")


@pytest.fixture(scope="module")
def updates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case in two launches: one process, then ``torchrun`` with 2 processes."""
    out = tmp_path_factory.mktemp("updates")
    run([sys.executable, str(SCRIPT), str(out), *ESTIMATORS], out)
    cases = [f"{e}:{s}" for e in ESTIMATORS for s in STRATEGIES]
    launch = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    run([*launch, "--standalone", str(SCRIPT), str(out), *cases], out)
    return out


@pytest.mark.slow
@pytest.mark.parametrize("estimator", ESTIMATORS)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_processes_match_one(updates: Path, estimator: str, strategy: str) -> None:
    """Policy (and, for GAE, critic) parameters after one update: 2 processes == 1."""
    a = torch.load(updates / f"{estimator}-one.pt")
    b = torch.load(updates / f"{estimator}-{strategy}.pt")
    assert a.keys() == b.keys()
    assert any(k.startswith("critic.") for k in a) == (estimator == "gae")
    from transformers import AutoModelForCausalLM

    from ragen_bench.tiny import tiny_model_path

    init = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
    moved = 0
    for k in a:
        assert torch.allclose(a[k], b[k], atol=1e-6, rtol=1e-4), (
            f"{k}: max diff {(a[k] - b[k]).abs().max()}"
        )
        moved += k in init and not torch.equal(a[k], init[k])
    assert moved == len(init), "every policy parameter must have moved (the check is not vacuous)"
    # The critic starts from the policy's weights (its backbone keys are the policy's).
    backbone = [k for k in a if k.startswith("critic.") and k[len("critic.") :] in init]
    assert len(backbone) == (len(init) - 1 if estimator == "gae" else 0)  # all but the LM head
    assert all(not torch.equal(a[k], init[k[len("critic.") :]]) for k in backbone)
