"""FSDP2 runs that finish, with 2 CPU processes (torchrun + gloo).

One set of runs in three launches, shared by every assertion (module fixture ``runs``), all
with a KL reference, ``ppo_epochs=2`` and 3 groups on 2 ranks (uneven work):

* ``fsdp``: 2 steps under FSDP2, a checkpoint after each (DCP shards) and ``final_model``;
* ``resumed``: FSDP2 again from ``fsdp``'s step-1 checkpoint alone (what a kill after step 1
  leaves) — must end where ``fsdp`` ended;
* ``ddp``: DDP from the same FSDP2 checkpoint (sharded -> full tensors);
* ``one``: one process, 2 steps, with checkpoints (full tensors);
* ``one_to_fsdp``: FSDP2 from ``one``'s step-1 checkpoint (full tensors -> shards);
* ``critic``: FSDP2 with a critic (GAE), a checkpoint and ``final_model``.  (The critic's
  parameters after an update are compared across process counts in
  ``tests/train/test_distributed.py``.)

Rollout sampling is seeded per (step, global group) and validation per fixed chunk, so one
process and two must produce the same episodes, metrics and weights.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from tests.helpers.launch import start

ROOT = Path(__file__).resolve().parents[2]
COMMON = [
    "--config",
    "tiny-bandit-grpo",
    "trainer.save_every=1",
    "trainer.keep_checkpoints=2",
    "trainer.total_steps=2",
    "trainer.val_every=2",
    "trainer.val_before_train=false",
    "trainer.val_episodes=6",
    "trainer.loggers=jsonl",
    "rollout.env_groups=3",
    "rollout.group_size=4",
    "rollout.batch_size=4",
    "optim.micro_batch_size=4",
    "optim.ppo_epochs=2",
    "algorithm.kl_coef=0.01",
    "algorithm.entropy_coef=0.01",
    "trainer.dist_timeout_s=120",
]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _run(cmd: list[str], cwd: Path) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=_env(), cwd=cwd)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]


TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2"]


def _train_one_process(out: Path) -> None:
    """``ragen-train starpo`` in this process (one thread, as the ranks have)."""
    import ragen_train.cli
    from tests.helpers.cli import in_process_cli

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with pytest.MonkeyPatch.context() as mp:
            code, _, err = in_process_cli(mp, ragen_train.cli)(
                "starpo", *COMMON, f"trainer.out_dir={out}"
            )
    finally:
        torch.set_num_threads(threads)
    assert code == 0, err[-4000:]


def _from_checkpoint(src: Path, out: Path, step: int = 1) -> None:
    """``out`` holds only checkpoint ``step`` of run ``src`` (as a kill after that step leaves it)."""
    name = f"step_{step:06d}"
    shutil.copytree(src / "checkpoints" / name, out / "checkpoints" / name)
    (out / "checkpoints" / "latest").write_text(name + "\n")


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three launches: ``one`` (in this process) while ``fsdp`` (``torchrun ...
    ragen_train.cli starpo``) runs, then every run that starts from their checkpoints in one
    ``torchrun`` of ``tests/helpers/dist_runs.py`` (``resumed`` first, in fresh processes, as
    after a kill)."""
    base = tmp_path_factory.mktemp("fsdp2")
    out = {k: base / k for k in ("fsdp", "resumed", "ddp", "one", "one_to_fsdp", "critic")}
    fsdp = ["trainer.distributed=fsdp2"]
    cli = [*TORCHRUN, "-m", "ragen_train.cli", "starpo", *COMMON, f"trainer.out_dir={out['fsdp']}"]
    with start([*cli, *fsdp], env=_env(), cwd=base) as launch:  # while `one` runs here
        _train_one_process(out["one"])
        launch.finish(timeout=300)
    _from_checkpoint(out["fsdp"], out["resumed"])
    _from_checkpoint(out["fsdp"], out["ddp"])
    _from_checkpoint(out["one"], out["one_to_fsdp"])
    critic = [*fsdp, "algorithm.adv_estimator=gae", "trainer.total_steps=1", "trainer.val_every=0"]
    no_val = ["trainer.val_every=0"]  # only `one` and `fsdp` compare validation metrics
    cases = [
        (out["resumed"], [*fsdp, *no_val], True),
        (out["ddp"], ["trainer.distributed=ddp", *no_val], True),
        (out["one_to_fsdp"], [*fsdp, *no_val], True),
        (out["critic"], critic, False),
    ]
    spec = base / "cases.json"
    spec.write_text(
        json.dumps(
            [
                {
                    "config": COMMON[1],
                    "overrides": [*COMMON[2:], f"trainer.out_dir={o}", *x],
                    "resume": r,
                }
                for o, x, r in cases
            ]
        )
    )
    _run([*TORCHRUN, str(ROOT / "tests" / "helpers" / "dist_runs.py"), str(spec)], base)
    return out


def _weights(run: Path) -> dict[str, torch.Tensor]:
    return load_file(str(run / "final_model" / "model.safetensors"))


def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _metrics(run: Path, phase: str) -> dict[int, dict[str, float]]:
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {r["step"]: r for r in rows if r.get("phase") == phase}


@pytest.mark.slow
def test_fsdp2_run_writes_sharded_checkpoints_and_a_loadable_final_model(runs) -> None:
    from ragen_train import checkpoint as ckpt

    run = runs["fsdp"]
    names = sorted(p.name for p in (run / "checkpoints").glob("step_*"))
    assert names == ["step_000001", "step_000002"]
    for name in names:
        d = run / "checkpoints" / name
        manifest = ckpt.verify(d)  # every rank's shard is hashed in the manifest
        shards = sorted(f for f in manifest["files"] if f.startswith("dcp/"))
        assert shards == ["dcp/.metadata", "dcp/__0_0.distcp", "dcp/__1_0.distcp"]
        assert not (d / "optimizer.pt").exists()  # the optimizer state is in the shards
    ckpt.verify(run / "final_model", kind=ckpt.MODEL_FORMAT)
    from transformers import AutoModelForCausalLM

    from ragen_bench.tiny import tiny_model_path

    final = _weights(run)
    init = AutoModelForCausalLM.from_pretrained(tiny_model_path()).state_dict()
    # full (gathered) shapes, not a rank's shard; and training moved them
    assert final["model.embed_tokens.weight"].shape == init["model.embed_tokens.weight"].shape
    assert all(final[k].shape == init[k].shape for k in final)
    assert sum(not torch.equal(final[k], init[k]) for k in final) == len(final)
    model = AutoModelForCausalLM.from_pretrained(run / "final_model")
    assert torch.equal(model.state_dict()["model.norm.weight"], final["model.norm.weight"])


@pytest.mark.slow
def test_fsdp2_resumed_after_step_1_ends_where_the_uninterrupted_run_ends(runs) -> None:
    assert _max_diff(_weights(runs["resumed"]), _weights(runs["fsdp"])) <= 1e-6


@pytest.mark.slow
def test_fsdp2_checkpoint_resumes_under_ddp_with_the_same_result(runs) -> None:
    assert _max_diff(_weights(runs["ddp"]), _weights(runs["fsdp"])) <= 1e-5


@pytest.mark.slow
def test_one_process_and_two_fsdp2_processes_train_the_same(runs) -> None:
    """Same rollouts (seeded per global group), same metrics and weights for 1 and 2 processes."""
    one, two = _metrics(runs["one"], "train"), _metrics(runs["fsdp"], "train")
    for step in (1, 2):
        # the entropy, KL and values of the update are functions of the sampled tokens
        for key in ("actor/entropy", "actor/kl_loss", "actor/pg_loss", "train/return"):
            assert one[step][key] == pytest.approx(two[step][key], rel=1e-5, abs=1e-7), (step, key)
        assert one[step]["batch/response_tokens"] == two[step]["batch/response_tokens"] > 0
    val1, val2 = _metrics(runs["one"], "val"), _metrics(runs["fsdp"], "val")
    for key in ("val/tokens", "val/return", "val/success"):  # val/tokens varies with the seed
        assert val1[2][key] == pytest.approx(val2[2][key], abs=1e-9), key
    assert _max_diff(_weights(runs["one"]), _weights(runs["fsdp"])) <= 1e-5


@pytest.mark.slow
def test_one_process_checkpoint_resumes_into_fsdp2(runs) -> None:
    assert _max_diff(_weights(runs["one_to_fsdp"]), _weights(runs["one"])) <= 1e-5


@pytest.mark.slow
def test_fsdp2_with_a_critic_and_uneven_groups_finishes_and_shards_the_critic(runs) -> None:
    import torch.distributed.checkpoint as dcp

    d = runs["critic"] / "checkpoints" / "step_000001"
    keys = set(dcp.FileSystemReader(str(d / "dcp")).read_metadata().state_dict_metadata)
    assert any(k.startswith("critic.") for k in keys), sorted(keys)[:5]
    assert any(k.startswith("critic_optim.") for k in keys)
    assert any(k.startswith("policy_optim.") for k in keys)
    assert "critic/vf_loss" in _metrics(runs["critic"], "train")[1]
    assert (runs["critic"] / "final_model" / "model.safetensors").is_file()
