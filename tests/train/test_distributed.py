"""torchrun with 2 CPU processes (gloo) gives the same parameters after one update as one
process with the same global batch, with DDP and with FSDP2 (``fully_shard`` on CPU); and
the rollout engine's weight stream under FSDP2 gives every rank full tensors, LoRA merged,
equal to those of the unsharded model (``sync/max_abs_err`` 0 in float32;
the engine itself is not started here, the stream it receives is what is checked, and
``tests/train/test_fsdp2_vllm.py`` runs the engines).

One ``torchrun`` launch runs every 2-process case (``tests/helpers/dist_update.py``); the
one-process reference runs in this process meanwhile."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.launch import start

SCRIPT = Path(__file__).resolve().parents[1] / "helpers" / "dist_update.py"


def _env() -> dict[str, str]:
    # PYTHONFAULTHANDLER: a rank that aborts prints every thread's Python stack, so a failure
    # says where it happened (torchrun's summary alone fills the last 4,000 characters).
    return {
        **os.environ,
        "OMP_NUM_THREADS": "1",
        "PYTHONFAULTHANDLER": "1",
        "PYTHONPATH": str(SCRIPT.parents[2]),
    }


ESTIMATORS = ("grpo", "gae")
STRATEGIES = ("ddp", "fsdp2")


@pytest.fixture(scope="module")
def updates(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every case: the one-process ones here (one thread, as each rank has), then one
    ``torchrun`` launch with 2 processes for the rest."""
    from tests.helpers.dist_update import run_cases

    out = tmp_path_factory.mktemp("updates")
    cases = [f"{e}:{s}" for e in ESTIMATORS for s in STRATEGIES]
    torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    cmd = [*torchrun, "--standalone", str(SCRIPT), str(out), *cases, "gather"]
    with start(cmd, env=_env(), cwd=out) as launch:  # while the one-process cases run here
        threads = torch.get_num_threads()
        torch.set_num_threads(1)
        try:
            run_cases(out, list(ESTIMATORS))
        finally:
            torch.set_num_threads(threads)
        launch.finish(timeout=600)
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


@pytest.mark.slow
def test_fsdp2_weight_stream_gives_every_rank_full_merged_tensors(updates: Path) -> None:
    for rank in (0, 1):
        got = torch.load(updates / f"gather-rank{rank}.pt")
        full, gathered = got["full"], got["gathered"]
        assert got["local_embed"][0] < full["model.embed_tokens.weight"].shape[0]  # sharded
        assert gathered.keys() == full.keys()
        assert not any("lora_" in k or "base_layer" in k for k in gathered)
        for k in full:
            assert gathered[k].shape == full[k].shape, k
            assert torch.equal(gathered[k], full[k]), k  # max_abs_err 0 in float32
