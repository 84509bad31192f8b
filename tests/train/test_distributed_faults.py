"""No hangs under torchrun, 2 CPU processes (gloo): a SIGSTOPped rank makes
the job exit non-zero within ``trainer.dist_timeout_s`` with one ``error:`` line naming the
rank that saw it.  (The FSDP2 weight stream is checked in
``tests/train/test_distributed.py``, in that file's launch.)
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from ragen_train import distributed

ROOT = Path(__file__).resolve().parents[2]


def _env() -> dict[str, str]:
    return {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}


def _children(pid: int) -> list[int]:
    try:
        return [int(x) for x in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _worker_of_rank(launcher: int, rank: int) -> int | None:
    for child in _children(launcher):
        try:
            env = Path(f"/proc/{child}/environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if f"RANK={rank}".encode() in env:
            return child
    return None


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="needs Linux /proc to find ranks")
def test_a_stopped_rank_ends_the_job_with_one_error_line(tmp_path: Path) -> None:
    timeout_s = 4
    cmd = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--standalone",
        "--nproc_per_node",
        "2",
        "-m",
        "ragen_train.cli",
        "starpo",
        "--config",
        "tiny-bandit-grpo",
        "trainer.save_every=0",
        "trainer.val_every=0",
        "trainer.total_steps=1000",
        "trainer.loggers=console",
        f"trainer.dist_timeout_s={timeout_s}",
        f"trainer.out_dir={tmp_path / 'run'}",
    ]
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    stopped = None
    try:
        assert proc.stdout is not None
        lines = []
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("train    2"):
                break
        stopped = _worker_of_rank(proc.pid, 1)
        assert stopped is not None, "".join(lines)[-3000:]
        os.kill(stopped, signal.SIGSTOP)
        t_stop = time.monotonic()
        errors = []
        for line in proc.stdout:
            if line.startswith("error:"):
                errors.append(line.strip())
                break
        waited = time.monotonic() - t_stop
        # torchrun would SIGKILL the stopped worker only after its 30 s grace period: let it run
        # on to receive the SIGTERM it is sent, so the test does not wait for that.
        os.kill(stopped, signal.SIGCONT)
        rest = proc.stdout.read()
        rc = proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert rc != 0
    assert errors, rest[-3000:]
    assert errors[0].startswith("error: rank 0 of 2: a collective got no answer"), errors[0]
    assert f"trainer.dist_timeout_s={timeout_s} s" in errors[0]
    assert waited < 60, f"the job noticed the stopped rank after {waited:.0f} s"
    assert "Traceback" not in "".join(lines)


def test_rollout_seed_is_stable_and_separates_keys() -> None:
    a = distributed.rollout_seed(0, "train", 3, 5)
    assert a == distributed.rollout_seed(0, "train", 3, 5)
    assert 0 <= a < 2**63
    others = {
        distributed.rollout_seed(0, "train", 3, 6),
        distributed.rollout_seed(0, "train", 4, 5),
    }
    others |= {distributed.rollout_seed(1, "train", 3, 5), distributed.rollout_seed(0, "val", 3, 5)}
    assert a not in others and len(others) == 4
    # a pinned value: the sampling seeds of a run must not change between versions
    assert distributed.rollout_seed(0, "train", 0, 0) == 5621862644837430399


def test_failure_message_names_the_rank_and_only_for_peer_failures(monkeypatch) -> None:
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "4")
    msg = distributed.failure_message(
        RuntimeError("[gloo/unbound_buffer.cc:81] Timed out waiting 5000ms for recv operation"), 5
    )
    assert msg is not None and msg.startswith("rank 1 of 4: ")
    assert "trainer.dist_timeout_s=5 s" in msg and "\n" not in msg
    assert distributed.failure_message(RuntimeError("shape mismatch"), 5) is None
    assert distributed.failure_message(ValueError("timed out"), 5) is None
    assert distributed.rank_prefix() == "[rank 1/4] "
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert distributed.rank_prefix() == ""


def test_trl_batch_counts_are_summed_over_processes() -> None:
    """Under torchrun the TRL back-end logged rank 0's share of ``batch/*`` (32 of 64 episodes)."""
    from ragen_train.backends.trl_backend import _sum_over_processes

    shares = [
        {"batch/episodes": 32.0, "batch/response_tokens": 500.0},
        {"batch/episodes": 32.0, "batch/response_tokens": 700.0, "batch/dropped": 1.0},
    ]
    got = _sum_over_processes(shares[0], lambda obj: [obj, shares[1]])
    assert got == {"batch/dropped": 1.0, "batch/episodes": 64.0, "batch/response_tokens": 1200.0}
