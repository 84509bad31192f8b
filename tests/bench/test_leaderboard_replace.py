"""``leaderboard add`` does not silently replace a published row with a weaker one.

Before: adding a 64-episode oracle run replaced the board's 256-episode oracle row.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ragen_bench.leaderboard import LeaderboardError, add_run
from ragen_bench.runner import RunRequest, start_run
from ragen_bench.validate import validate_file

ROOT = Path(__file__).resolve().parents[2]
ENV = "ragen/Bandit-v0"


def _oracle(out: Path, run_id: str, episodes: int, seed: int = 0) -> Path:
    return start_run(
        RunRequest(
            env_id=ENV,
            backend="oracle",
            episodes=episodes,
            group_size=4,
            seed=seed,
            out=str(out),
            run_id=run_id,
        )
    )


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("runs")
    return {
        "big": _oracle(out, "big", 32),
        "small": _oracle(out, "small", 8),
        "bigger": _oracle(out, "bigger", 48),
        "shifted": _oracle(out, "shifted", 32, seed=100),
    }


def _entry(board: Path) -> dict:
    (entry,) = json.loads(board.read_text())["entries"]
    return entry


def test_fewer_episodes_do_not_replace_a_published_row(
    runs: dict[str, Path], tmp_path: Path
) -> None:
    board = tmp_path / "board.json"
    add_run(board, runs["big"], label="oracle")
    before = board.read_bytes()
    with pytest.raises(LeaderboardError, match=r"8 episodes, the published entry 32.*--replace"):
        add_run(board, runs["small"], label="oracle")
    assert board.read_bytes() == before  # nothing written
    with pytest.raises(LeaderboardError, match=r"seeds 100\.\.107, the published entry 0\.\.7"):
        add_run(board, runs["shifted"], label="oracle")
    add_run(board, runs["big"], label="oracle")  # the same run again: fine
    add_run(
        board, runs["bigger"], label="oracle"
    )  # more episodes, seeds covering the old ones: fine
    assert _entry(board)["episodes"] == 48 and _entry(board)["seeds"] == {
        "base": 0,
        "groups": 12,
        "group_size": 4,
    }
    add_run(board, runs["small"], label="oracle", replace=True)
    assert _entry(board)["run_id"] == "small"
    assert validate_file(board) == ("leaderboard", 1)


def test_cli_refuses_without_replace(runs: dict[str, Path], tmp_path: Path) -> None:
    board = tmp_path / "board.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "200"}

    def add(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "ragen_bench",
                "leaderboard",
                "add",
                str(runs[extra[0]]),
                "--board",
                str(board),
                "--label",
                "oracle",
                *extra[1:],
            ],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )

    assert add("big").returncode == 0
    refused = add("small")
    assert refused.returncode == 1 and "pass --replace" in refused.stderr
    assert _entry(board)["run_id"] == "big"
    assert add("small", "--replace").returncode == 0 and _entry(board)["run_id"] == "small"


def test_published_rows_without_seeds_need_replace(runs: dict[str, Path], tmp_path: Path) -> None:
    board = tmp_path / "board.json"
    add_run(board, runs["big"], label="oracle")
    data = json.loads(board.read_text())
    del data["entries"][0]["seeds"]  # as the boards published before entries recorded seeds
    board.write_text(json.dumps(data))
    with pytest.raises(LeaderboardError, match="does not record its seeds"):
        add_run(board, runs["bigger"], label="oracle")
