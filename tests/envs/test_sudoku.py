"""Sudoku: unique puzzles, the move grammar, rule checks, rewards, truncation, splits.

Spec: docs/envs/sudoku.md.  The hand puzzle ``HAND`` (5 givens) has the unique solution
``SOLUTION`` (checked here by brute force over all 288 complete 4x4 grids)::

    . 2 3 .        1 2 3 4
    . . . .        3 4 1 2
    . 1 . .        2 1 4 3
    4 . . 1        4 3 2 1
"""

from __future__ import annotations

import itertools
from functools import cache

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.envs.sudoku import (
    EMPTY_CELLS,
    SudokuEnv,
    count_solutions,
    from_text,
    parse_move,
    solve,
)
from ragen_envs.envs.sudoku.moves import Move
from ragen_envs.seeding import SPLITS, instance_split

HAND = ".23......1..4..1"
SOLUTION = "1234341221434321"


@cache
def all_4x4_grids() -> tuple[tuple[int, ...], ...]:
    """Every complete 4x4 Sudoku grid, by brute force over row permutations (independent
    of the solver under test).  There are 288 (a known count)."""
    perms = list(itertools.permutations(range(1, 5)))
    grids = []
    for rows in itertools.product(perms, repeat=4):
        if any(len({rows[r][c] for r in range(4)}) != 4 for c in range(4)):
            continue
        boxes_ok = all(
            len({rows[r][c] for r in (br, br + 1) for c in (bc, bc + 1)}) == 4
            for br in (0, 2)
            for bc in (0, 2)
        )
        if boxes_ok:
            grids.append(tuple(v for row in rows for v in row))
    return tuple(grids)


def brute_force_count(givens: tuple[int, ...] | list[int]) -> int:
    """Number of complete grids consistent with ``givens`` (4x4)."""
    return sum(all(g == 0 or g == v for g, v in zip(givens, grid)) for grid in all_4x4_grids())


def hand_env(**config) -> SudokuEnv:
    env = SudokuEnv(**config)
    env.reset(seed=0, options={"puzzle": HAND})
    return env


def test_brute_force_reference() -> None:
    assert len(all_4x4_grids()) == 288
    assert brute_force_count(from_text(HAND)) == 1
    assert tuple(from_text(SOLUTION)) in all_4x4_grids()


# ------------------------------------------------------------- generation
@pytest.mark.parametrize("difficulty", ["easy", "medium", "hard"])
def test_4x4_puzzles_have_exactly_one_solution_by_brute_force(difficulty: str) -> None:
    env = SudokuEnv(size=4, difficulty=difficulty)
    for seed in range(200):
        _, info = env.reset(seed=seed)
        assert info["empty_cells"] == EMPTY_CELLS[4][difficulty]
        assert brute_force_count(env.givens) == 1, f"seed {seed}"


@pytest.mark.parametrize("difficulty", ["easy", "hard"])
def test_9x9_puzzles_have_exactly_one_solution(difficulty: str) -> None:
    env = SudokuEnv(size=9, difficulty=difficulty)
    for seed in range(15):
        _, info = env.reset(seed=seed)
        assert info["empty_cells"] == EMPTY_CELLS[9][difficulty]
        assert count_solutions(list(env.givens), limit=2) == 1


def test_presets_have_the_documented_empty_cells() -> None:
    expected = {
        "ragen/Sudoku-v0": 6,
        "ragen/Sudoku-4x4-Medium-v0": 8,
        "ragen/Sudoku-4x4-Hard-v0": 9,
        "ragen/Sudoku-9x9-Easy-v0": 32,
        "ragen/Sudoku-9x9-Medium-v0": 40,
        "ragen/Sudoku-9x9-Hard-v0": 48,
    }
    for env_id, empty in expected.items():
        env = ragen_envs.make(env_id)
        _, info = env.reset(seed=7)
        assert info["empty_cells"] == empty
        assert env.unwrapped.config["max_steps"] == 2 * empty  # null -> twice the empty cells
        assert env.unwrapped.optimal_return() == empty + 10


def test_same_seed_same_puzzle_and_seeds_differ() -> None:
    a, b = SudokuEnv(size=9), SudokuEnv(size=9)
    assert a.reset(seed=3) == b.reset(seed=3)
    assert a.givens == b.givens
    b.reset(seed=4)
    assert a.givens != b.givens


@pytest.mark.parametrize(("size", "n"), [(4, 100), (9, 25)])
def test_splits_are_disjoint_by_solution_grid(size: int, n: int) -> None:
    keys: dict[str, set[str]] = {}
    for split in SPLITS:
        env = SudokuEnv(size=size, split=split)
        keys[split] = set()
        for seed in range(n):
            env.reset(seed=seed)
            solution = env._solution  # the generator's solution grid (split key)
            key = "sudoku:" + "".join(map(str, solution))
            assert instance_split(key) == split
            keys[split].add(key)
    for a, b in itertools.combinations(SPLITS, 2):
        assert not keys[a] & keys[b]


def test_loaded_puzzle_must_be_unique() -> None:
    env = SudokuEnv()
    with pytest.raises(ValueError, match="exactly one solution"):
        env.reset(seed=0, options={"puzzle": "." * 16})
    with pytest.raises(ValueError, match="16 or 81"):
        env.reset(seed=0, options={"puzzle": "123"})


# ---------------------------------------------------------------- grammar
ACCEPTED = [
    ("place 4 at row 1 col 3", Move("place", 1, 3, 4)),
    ("PLACE 4 AT ROW 1 COL 3", Move("place", 1, 3, 4)),
    ("  place   4 at\trow 1   column 3 \n", Move("place", 1, 3, 4)),
    ("place 4 at row 1, col 3", Move("place", 1, 3, 4)),
    ("place 4 at row 1 ,col 3", Move("place", 1, 3, 4)),
    ("1,3,4", Move("place", 1, 3, 4)),
    (" 1 , 3 , 4 ", Move("place", 1, 3, 4)),
    ("(1,3,4)", Move("place", 1, 3, 4)),
    ("( 1, 3, 4 )", Move("place", 1, 3, 4)),
    ("01,03,04", Move("place", 1, 3, 4)),
    ("clear row 2 col 1", Move("clear", 2, 1)),
    ("Clear Row 2, Column 1", Move("clear", 2, 1)),
    ("place 10 at row 1 col 1", Move("place", 1, 1, 10)),  # grammatical; out of range by the rules
    ("0,0,0", Move("place", 0, 0, 0)),
]

REJECTED = [
    "",
    "   ",
    "place 4 at row 1 col 3.",
    "place 4 row 1 col 3",
    "place 4 at (1,3)",
    "place 4 at 1,3",
    "4 at 1,3",
    "1,3",
    "1,3,4,5",
    "(1,3,4",
    "1,3,4)",
    "((1,3,4))",
    "place4 at row 1 col 3",
    "place 4 at row1 col 3",
    "place four at row 1 col 3",
    "place 4 at row 1 col 3 || 1,1,1",
    "place 1234 at row 1 col 1",
    "place \u0663 at row 1 col 1",
    "1\uff0c3\uff0c4",
    "\u00a0place 4 at row 1 col 3",
    "place 4 at row 1 col 3 please",
    "1 3 4",
    "1;3;4",
    "clear 1,3",
    "clear row 1 col 3 4",
    "place -1 at row 1 col 1",
    "place 4 at row 1 col " + "3" * 100,
]


@pytest.mark.parametrize(("text", "move"), ACCEPTED)
def test_grammar_accepts(text: str, move: Move) -> None:
    assert parse_move(text) == move


@pytest.mark.parametrize("text", REJECTED)
def test_grammar_rejects(text: str) -> None:
    assert parse_move(text) is None
    env = hand_env()
    before = env.grid
    _, reward, terminated, _, info = env.step(text)
    assert (reward, terminated, info["action_is_valid"], env.grid) == (-0.1, False, False, before)
    assert info["invalid_reason"].startswith("not a move")


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_arbitrary_text_never_raises(text: str) -> None:
    env = hand_env()
    before = env.grid
    _, reward, _, _, info = env.step(text)
    if not info["action_is_valid"]:
        assert reward == -0.1 and env.grid == before


# ------------------------------------------------------------------ rules
@pytest.mark.parametrize(
    ("move", "units", "conflicts"),
    [
        ("place 4 at row 4 col 3", "row", [[4, 1]]),
        ("place 4 at row 2 col 1", "column", [[4, 1]]),
        ("place 2 at row 2 col 1", "box", [[1, 2]]),
        ("place 1 at row 3 col 4", "row and column and box", [[3, 2], [4, 4]]),
        ("place 3 at row 1 col 4", "row and box", [[1, 3]]),
    ],
)
def test_conflicts_are_detected(move: str, units: str, conflicts: list[list[int]]) -> None:
    env = hand_env()
    before = env.grid
    obs, reward, terminated, _, info = env.step(move)
    assert info["action_is_valid"] is False and reward == -0.1 and not terminated
    assert info["conflicts"] == conflicts
    assert f"already in the same {units} (" in info["invalid_reason"]
    assert env.grid == before and obs == env.reset(seed=0, options={"puzzle": HAND})[0]


@pytest.mark.parametrize(
    "move", ["place 1 at row 1 col 2", "1,2,1", "place 2 at row 1 col 2", "clear row 1 col 2"]
)
def test_given_cells_are_immutable(move: str) -> None:
    env = hand_env()
    before = env.grid
    _, reward, _, _, info = env.step(move)
    assert (reward, info["action_is_valid"], env.grid) == (-0.1, False, before)
    assert "is a given" in info["invalid_reason"]


@pytest.mark.parametrize(
    "move", ["place 5 at row 1 col 1", "place 0 at row 1 col 1", "5,1,1", "place 1 at row 0 col 1"]
)
def test_out_of_range_is_invalid(move: str) -> None:
    env = hand_env()
    _, reward, _, _, info = env.step(move)
    assert (reward, info["action_is_valid"]) == (-0.1, False)
    assert "between 1 and 4" in info["invalid_reason"]


def test_moves_are_checked_by_rules_not_by_the_solution() -> None:
    """1 at row 2 col 1 breaks no rule although the solution has 3 there: accepted (+1)."""
    env = hand_env()
    assert SOLUTION[4] == "3"
    _, reward, _, _, info = env.step("place 1 at row 2 col 1")
    assert (reward, info["action_is_valid"], info["action_is_effective"]) == (1.0, True, True)


def test_no_farming_overwrite_and_clear_earn_zero() -> None:
    env = hand_env()
    steps = [
        ("place 1 at row 2 col 1", 1.0, True),  # new digit in an empty cell
        ("2,1,3", 0.0, True),  # overwrite with another valid digit
        ("place 1 at row 2 col 1", 0.0, True),  # and back
        ("place 1 at row 2 col 1", 0.0, False),  # same digit: nothing changes
        ("clear row 2 col 1", 0.0, True),  # clearing earns nothing
        ("clear row 2 col 1", 0.0, False),  # already empty
        ("place 3 at row 2 col 1", 0.0, True),  # this cell has earned already
        ("place 4 at row 2 col 2", 1.0, True),  # another cell earns once
    ]
    for move, reward, effective in steps:
        _, r, terminated, _, info = env.step(move)
        assert (r, info["action_is_valid"], info["action_is_effective"], terminated) == (
            reward,
            True,
            effective,
            False,
        ), move
    assert env.episode_return == 2.0


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 4), st.integers(1, 4), st.integers(0, 4)), max_size=60))
def test_positive_rewards_never_exceed_the_optimal_return(moves) -> None:
    """Whatever well-formed moves are played (digit 0 = clear), the rewards earned never
    exceed (#empty cells) * 1 + 10."""
    env = hand_env(max_steps=1000)
    earned = 0.0
    for r, c, d in moves:
        move = f"clear row {r} col {c}" if d == 0 else f"{r},{c},{d}"
        _, reward, terminated, _, _ = env.step(move)
        earned += max(reward, 0.0)
        if terminated:
            break
    assert earned <= env.optimal_return() == 11 + 10


def test_completion_bonus_and_success() -> None:
    env = SudokuEnv()
    _, info = env.reset(seed=0, options={"puzzle": SOLUTION[:-1] + "."})
    assert info["empty_cells"] == 1 and env.config["max_steps"] == 2
    obs, reward, terminated, truncated, info = env.step("place 1 at row 4 col 4")
    assert (reward, terminated, truncated, info["success"], info["status"]) == (
        11.0,
        True,
        False,
        True,
        "success",
    )
    assert "solved" in obs


def test_oracle_recovers_from_a_wrong_digit() -> None:
    env = hand_env()
    env.step("place 1 at row 2 col 1")  # valid by the rules, not the solution's digit
    plan = env.oracle_actions()
    assert plan[0] == "clear row 2 col 1" and len(plan) == 1 + 11
    for move in plan:
        _, reward, terminated, _, info = env.step(move)
    assert terminated and info["success"]
    assert env.episode_return == 1.0 + 10 + 10  # the refilled cell does not earn twice
    assert "".join(map(str, env.grid)) == SOLUTION


def test_truncation_counts_invalid_moves() -> None:
    env = hand_env(max_steps=3)
    for k in range(1, 4):
        _, reward, terminated, truncated, info = env.step(
            "nonsense" if k != 2 else "place 2 at row 2 col 1"
        )
        assert reward == -0.1 and not terminated
        assert truncated == (k == 3)
    assert info["status"] == "step_limit"


def test_observation_marks_givens_and_reports_last_move() -> None:
    env = hand_env()
    obs0 = env.reset(seed=0, options={"puzzle": HAND})[0]
    assert obs0 == (
        "    1   2     3   4\n"
        " 1  .  [2] | [3]  .\n"
        " 2  .   .  |  .   .\n"
        "   --------+--------\n"
        " 3  .  [1] |  .   .\n"
        " 4 [4]  .  |  .  [1]\n"
        "Empty cells: 11.\n"
        "Last accepted move: none yet."
    )
    obs, *_ = env.step("1,1,1")
    assert obs.splitlines()[1] == " 1  1  [2] | [3]  ."
    assert obs.endswith(
        "Empty cells: 10.\nLast accepted move: place 1 at row 1 col 1 -> placed (+1)."
    )


def test_instruction_has_rules_grammar_and_examples() -> None:
    text = SudokuEnv(size=9).instruction
    for needle in (
        "9x9",
        "3x3 box",
        "place N at row R col C",
        "R,C,N",
        "(R,C,N)",
        "clear row R col C",
        "<answer>place 4 at row 1 col 3</answer>",
        "||",
        "+10",
        "0.1",
    ):
        assert needle in text


def test_solver_finds_the_hand_solution() -> None:
    assert [("".join(map(str, s))) for s in solve(from_text(HAND), limit=2)] == [SOLUTION]
