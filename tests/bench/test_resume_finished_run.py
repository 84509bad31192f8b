"""``ragen-bench run --resume`` on a finished run.

Before: ``--episodes`` was silently ignored, and every resume of a finished run appended an
empty session to ``run.json``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_bench.results import RunDir
from ragen_bench.runner import RunRequest, resume_run, start_run

ROOT = Path(__file__).resolve().parents[2]


def _bench(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}
    return subprocess.run(
        [sys.executable, "-m", "ragen_bench", "run", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture()
def finished(tmp_path: Path) -> Path:
    return start_run(
        RunRequest(
            env_id="ragen/FrozenLake-v0",
            backend="oracle",
            episodes=8,
            group_size=2,
            out=str(tmp_path),
            run_id="lake",
        )
    )


def test_resume_of_a_finished_run_records_no_empty_session(finished: Path) -> None:
    run_before = (finished / "run.json").read_bytes()
    summary_before = (finished / "summary.json").read_bytes()
    proc = _bench("--resume", str(finished), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "is complete: all 8 episodes are recorded, nothing was played" in " ".join(
        proc.stderr.split()
    )
    assert (finished / "run.json").read_bytes() == run_before
    assert (finished / "summary.json").read_bytes() == summary_before


def test_resume_with_more_episodes_extends_the_run(finished: Path) -> None:
    first = {i: e for i, e in RunDir(finished).read_episodes().items()}
    proc = _bench(
        "--resume", str(finished), "--episodes", "12", "--no-progress", "--temperature", "0.9"
    )
    assert proc.returncode == 0, proc.stderr
    err = " ".join(proc.stderr.split())
    assert (
        "extended from 8 to 12 episodes" in err
        and "ignored with --resume" in err
        and "--temperature" in err
    )
    run = json.loads((finished / "run.json").read_text())
    assert run["episodes"] == 12 and run["sessions"][-1]["extended_from"] == 8
    assert run["sessions"][-1]["episodes_before"] == 8 and run["sessions"][-1]["to_play"] == 4
    episodes = RunDir(finished).read_episodes()
    assert sorted(episodes) == list(range(12))
    assert all(episodes[i] == first[i] for i in first)  # the recorded ones are kept as they were
    assert [episodes[i]["seed"] for i in range(8, 12)] == [4, 4, 5, 5]  # group g plays seed 0 + g
    summary = json.loads((finished / "summary.json").read_text())
    assert summary["episodes"] == {"requested": 12, "recorded": 12, "scored": 12, "missing": 0}


def test_resume_refuses_fewer_or_ungrouped_episodes(finished: Path) -> None:
    before = (finished / "run.json").read_bytes()
    with pytest.raises(ValueError, match="cannot be shortened"):
        resume_run(finished, episodes=4)
    proc = _bench("--resume", str(finished), "--episodes", "9", "--no-progress")
    assert proc.returncode == 2 and "multiple of the run's group size (2)" in proc.stderr
    assert (finished / "run.json").read_bytes() == before
