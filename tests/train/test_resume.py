"""Killing training (SIGKILL) and resuming from the last checkpoint gives the same metrics at
the next step as an uninterrupted run with the same seed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.forked_runs import run_jobs

ARGS = [
    "trainer.total_steps=6",
    "trainer.save_every=1",
    "trainer.val_every=0",
    "rollout.env_groups=2",
    "rollout.group_size=4",
    "rollout.max_new_tokens=16",
    "trainer.loggers=jsonl",
    "optim.lr=1e-3",
    "trainer.collapse_every=2",
    "trainer.keep_checkpoints=2",
]
# process measurements differ run to run: wall-clock (time, time/*, *timing*), peak RSS (perf/*)
SKIP = ("time", "perf/")


def cli(out: Path, *extra: str, preset: str = "quickstart") -> list[str]:
    return ["starpo", "--config", preset, *ARGS, f"trainer.out_dir={out}", *extra]


def rows(out: Path) -> dict[int, dict]:
    by_step: dict[int, dict] = {}
    for line in (out / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line)
        if r["phase"] == "train":
            by_step[r["step"]] = r  # the last occurrence wins (a step logged twice around a kill)
    return by_step


def same(a: dict, b: dict) -> None:
    def wanted(k: str) -> bool:
        return not k.startswith(SKIP) and "timing" not in k and k != "phase"

    keys = {k for k in a if wanted(k)}
    assert keys == {k for k in b if wanted(k)}
    for k in sorted(keys):
        if a[k] is None or b[k] is None:
            assert a[k] == b[k], k
        else:
            assert a[k] == pytest.approx(b[k], rel=1e-6, abs=1e-9), k


PRESETS = ("quickstart", "tiny-bandit-ppo", "tiny-sokoban-grpo", "tiny-sokoban-ppo")


def kill_jobs(tmp_path: Path, preset: str) -> list[dict]:
    """Run ``preset`` 6 steps uninterrupted; run it again and SIGKILL it part-way (as soon as
    ``checkpoints/latest`` names step 2 or later); resume it from the last checkpoint."""
    full, broken = tmp_path / "full", tmp_path / "broken"
    pointer = broken / "checkpoints" / "latest"
    return [
        {"args": cli(full, preset=preset), "log": str(full) + ".log"},
        {
            "args": cli(broken, preset=preset),
            "log": str(broken) + ".log",
            "kill": {"watch": str(pointer), "at_least": "step_000002", "delay_s": 0.0},
        },
        {
            "args": cli(broken, "--resume", "latest", preset=preset),
            "log": str(broken) + ".resume.log",
        },
    ]


@pytest.fixture(scope="module")
def kill_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, list[dict]]]:
    """``preset -> (its directory, the results of its three runs)`` for every preset of
    :data:`PRESETS`: all twelve runs are forked, one after another, from one warm
    interpreter (tests/helpers/forked_runs.py), each a separate process."""
    root = tmp_path_factory.mktemp("resume")
    for preset in PRESETS:
        (root / preset).mkdir()
    jobs = [job for preset in PRESETS for job in kill_jobs(root / preset, preset)]
    results = run_jobs(jobs, timeout=3600)
    return {p: (root / p, results[3 * i : 3 * i + 3]) for i, p in enumerate(PRESETS)}


def check_resumed(tmp_path: Path, results: list[dict]) -> None:
    """Every step after the checkpoint resumed from must match the uninterrupted run."""
    full, broken = tmp_path / "full", tmp_path / "broken"
    assert results[0]["rc"] == 0, (tmp_path / "full.log").read_text()[-3000:]
    reference = rows(full)
    assert sorted(reference) == [1, 2, 3, 4, 5, 6]
    assert results[1]["killed"], results[1]
    k = int(Path(str(broken) + ".resume.log").read_text().split("(step ")[1].split(")")[0])
    assert 2 <= k < 6, "the kill must land part-way"
    assert results[2]["rc"] == 0, (tmp_path / "broken.resume.log").read_text()[-3000:]
    resumed = rows(broken)
    assert sorted(resumed) == [1, 2, 3, 4, 5, 6]
    for step in range(k + 1, 7):
        same(resumed[step], reference[step])


@pytest.mark.slow
def test_kill_and_resume_matches_uninterrupted(kill_runs) -> None:
    check_resumed(*kill_runs["quickstart"])


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["tiny-bandit-ppo", "tiny-sokoban-grpo", "tiny-sokoban-ppo"])
def test_kill_and_resume_matches_uninterrupted_for_ppo_and_every_preset_family(
    kill_runs, preset: str
) -> None:
    """PPO (GAE + critic; its values come from eval mode, so a resumed critic
    gives the same values as the uninterrupted one) and every CPU preset family (Bandit and
    Sokoban, GRPO and PPO; ``quickstart`` is tiny-bandit-grpo) resume exactly.  The GPU task
    presets (``bandit``, ``sokoban``, ...) share these code paths with a hub model."""
    check_resumed(*kill_runs[preset])
