"""Run ``ragen-train`` commands through the fork server (tests/helpers/kill_driver.py).

One warm interpreter imports the trainer stack once and forks each run, so a test that
needs several runs (an uninterrupted reference, a run SIGKILLed part-way, its resume) pays
for training steps rather than for interpreter start-ups.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ragen_train import checkpoint as ckpt

ROOT = Path(__file__).resolve().parents[2]


def run_jobs(jobs: list[dict], timeout: float = 900) -> list[dict]:
    """Run ``jobs`` (the spec of kill_driver.py: args, log, env, copy, kill) one after
    another, each in a forked child with ``OMP_NUM_THREADS=1``; returns one result dict per
    job (``rc``, ``killed``, ``saw_watch``, ``watch_left``).

    Raises:
        AssertionError: the driver itself failed (its stderr's tail is the message).
    """
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    env.pop(ckpt.TEST_DELAY_ENV, None)
    proc = subprocess.run(
        [sys.executable, str(ROOT / "tests" / "helpers" / "kill_driver.py")],
        input=json.dumps({"jobs": jobs}),
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = [json.loads(line) for line in proc.stdout.splitlines()]
    assert len(results) == len(jobs), proc.stderr[-3000:]
    return results
