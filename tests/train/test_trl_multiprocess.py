"""The TRL back-end with 2 CPU processes under ``accelerate launch``.

``accelerate launch --cpu --num_processes 2`` starts one process (its ``--cpu`` launcher
runs the script once unless given an mpirun host file); ``--multi_gpu`` launches through
torchrun, and on a machine without GPUs accelerate's processes join with gloo.  One launch
of one step shows that two processes trained (one RNG state file per process in TRL's
checkpoint) and that the logged ``batch/*`` counts are the whole batch's, not rank 0's share.
"""

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
GROUPS, GROUP_SIZE, NEW_TOKENS = 2, 2, 8


@pytest.mark.slow
def test_two_process_accelerate_launch_logs_whole_batch_counts(tmp_path: Path) -> None:
    exe = shutil.which("accelerate") or str(Path(sys.executable).with_name("accelerate"))
    out = tmp_path / "run"
    cmd = [exe, "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"]
    cmd += ["--mixed_precision", "no", "--dynamo_backend", "no", "-m", "ragen_train"]
    cmd += ["starpo", "--trainer", "trl", "--config", "quickstart", f"trainer.out_dir={out}"]
    cmd += [f"rollout.env_groups={GROUPS}", f"rollout.group_size={GROUP_SIZE}"]
    cmd += [f"rollout.max_new_tokens={NEW_TOKENS}", "trainer.total_steps=1"]
    cmd += ["trainer.val_every=0", "trainer.save_every=1", "trainer.loggers=jsonl"]
    cmd += ["trainer.collapse_every=0"]
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "OMP_NUM_THREADS": "1",
        "MKL_NUM_THREADS": "1",
        "CUDA_VISIBLE_DEVICES": "",  # the CPU form, also on a machine with GPUs
    }
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, env=env, cwd=ROOT)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    ckpt = out / "trl" / "checkpoint-1"
    assert sorted(p.name for p in ckpt.glob("rng_state_*.pth")) == [
        "rng_state_0.pth",
        "rng_state_1.pth",
    ], "accelerate did not start two processes"
    assert proc.stdout.count("done (trl)") == 1, proc.stdout  # rank 0 alone prints it
    rows = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    assert [(r["step"], r["phase"]) for r in rows] == [(1, "train")]
    row, n = rows[0], GROUPS * GROUP_SIZE
    # each process rolled out half of the groups; the logged counts are the sums
    assert row["batch/episodes"] == n and row["batch/samples"] == n, row
    assert row["batch/response_tokens"] == n * NEW_TOKENS, row  # every answer hits the cap


def test_cpu_launch_that_starts_one_process_warns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The environment ``accelerate launch --cpu --num_processes 2`` gives its one process:
    a one-line warning naming the launches that start two, then the run trains."""
    import ragen_train.cli
    from tests.helpers.cli import in_process_cli

    monkeypatch.setenv("ACCELERATE_USE_CPU", "True")
    monkeypatch.setenv("MASTER_PORT", "29500")
    for var in ("WORLD_SIZE", "RANK", "OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "MV2_COMM_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    code, _, err = in_process_cli(monkeypatch, ragen_train.cli)(
        "starpo",
        "--trainer",
        "trl",
        "--config",
        "quickstart",
        f"trainer.out_dir={tmp_path}",
        "trainer.total_steps=1",
        "trainer.val_every=0",
        "trainer.save_every=0",
        "rollout.env_groups=1",
        "rollout.group_size=2",
        "rollout.max_new_tokens=4",
    )
    assert code == 0, err
    lines = [x for x in err.splitlines() if "started one training process" in x]
    assert len(lines) == 1 and lines[0].startswith("warning:") and "--multi_gpu" in lines[0], err


@pytest.mark.parametrize(
    ("env", "refused"),
    [
        ({"ACCELERATE_USE_CPU": "True", "MASTER_PORT": "29500"}, True),
        ({"ACCELERATE_USE_CPU": "True"}, False),  # --num_processes 1
        ({"ACCELERATE_USE_CPU": "True", "MASTER_PORT": "1", "WORLD_SIZE": "2"}, False),
        ({"ACCELERATE_USE_CPU": "True", "MASTER_PORT": "1", "OMPI_COMM_WORLD_SIZE": "2"}, False),
        ({"ACCELERATE_USE_CPU": "False", "MASTER_PORT": "29500"}, True),  # no GPU flag
        ({"MASTER_PORT": "29500"}, False),  # not accelerate's plain launcher
    ],
)
def test_single_process_launch_problem(env: dict[str, str], refused: bool) -> None:
    from ragen_train.backends.trl_backend import single_process_launch_problem

    assert (single_process_launch_problem(env) is not None) is refused
