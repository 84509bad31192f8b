"""The published baseline rows of the 2048 and RubiksCube ids.

``leaderboards/games.json`` is written by ``scripts/make_baseline_boards.sh`` from real
``ragen-bench run``s; this checks it loads under the leaderboard schema and that its rows
say what the spec pages claim (the cube's oracle always solves; 2048's expectimax row is
labelled as a baseline, not an oracle, and beats random).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from ragen_bench.leaderboard import load_board

BOARD = Path(__file__).resolve().parents[2] / "leaderboards" / "games.json"


@pytest.fixture(scope="module")
def rows() -> dict[tuple[str, str], dict]:
    board = load_board(BOARD)
    assert board is not None, f"{BOARD} is missing: run scripts/make_baseline_boards.sh"
    return {(e["env_id"], e["model"]): e for e in board["entries"]}


@pytest.mark.parametrize(
    "env_id", ["ragen/2048-Target64-v0", "ragen/2048-v0", "ragen/2048-Target256-v0"]
)
def test_2048_rows_random_and_expectimax(rows: dict, env_id: str) -> None:
    best, rand = rows[(env_id, "expectimax")], rows[(env_id, "random")]
    assert best["backend"] == "oracle" and (env_id, "oracle") not in rows
    assert best["episodes"] == rand["episodes"] == 256
    assert best["metrics"]["success"]["mean"] > rand["metrics"]["success"]["mean"]


@pytest.mark.parametrize(
    "env_id", ["ragen/RubiksCube-v0", "ragen/RubiksCube-Depth5-v0", "ragen/RubiksCube-Scrambled-v0"]
)
def test_cube_rows_oracle_solves_everything(rows: dict, env_id: str) -> None:
    best, rand = rows[(env_id, "oracle")], rows[(env_id, "random")]
    assert best["metrics"]["success"]["mean"] == 1.0 and best["metrics"]["return"]["mean"] == 1.0
    assert rand["metrics"]["success"]["mean"] < 0.5
