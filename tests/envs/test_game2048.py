"""2048: slides and merges, the merge reward, illegal moves, spawns from the env RNG,
termination, splits and the expectimax baseline.

Spec: docs/envs/game2048.md.  Expected boards and rewards are worked out by hand in the
comments; RAGEN's reward is ``0.1 * log2(M + 1)`` for merge score ``M > 0``
(RAGEN-AI/RAGEN ragen/env/game_2048/).
"""

from __future__ import annotations

import copy
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.envs.game2048 import MOVES, best_move, legal_moves, merge_reward, move, slide_line
from ragen_envs.envs.game2048.board import render
from ragen_envs.envs.game2048.expectimax import heuristic, line_score

EMPTY_ROWS = [[0, 0, 0, 0]] * 3

#: 0.1 * log2(8 + 1): the reward of a move whose merges create tiles summing to 8.
REWARD_M8 = 0.31699250014423125


def _env(env_id: str = "ragen/2048-v0", **config):
    return ragen_envs.make(env_id, **config).unwrapped


def _board_before_spawn(info: dict) -> list[list[int]]:
    """The board right after the slide: the step's board with the spawned tile removed."""
    rows = [list(r) for r in info["board"]]
    r, c = info["spawn"]["cell"]
    assert rows[r][c] == info["spawn"]["value"]
    rows[r][c] = 0
    return rows


def _flat(rows: list[list[int]]) -> tuple[int, ...]:
    return tuple(v for r in rows for v in r)


# ----------------------------------------------------------------- must show
def test_2222_left_is_4400_with_ragen_reward() -> None:
    env = _env()
    env.reset(seed=0, options={"board": [[2, 2, 2, 2]] + EMPTY_ROWS})
    obs, reward, terminated, truncated, info = env.step("Left")
    # The wall-side pair merges first, then the next pair: [4, 4, 0, 0]; the merged
    # tiles sum to M = 4 + 4 = 8, so the reward is 0.1 * log2(9).
    assert _board_before_spawn(info) == [[4, 4, 0, 0]] + EMPTY_ROWS
    assert info["merge_score"] == 8 and info["score"] == 8
    assert reward == pytest.approx(REWARD_M8, abs=1e-15)
    assert reward == pytest.approx(0.1 * math.log2(9), abs=1e-15)
    assert (
        info["action_is_valid"] and info["action_is_effective"] and not terminated and not truncated
    )


def test_4480_left_is_8800_no_double_merge() -> None:
    env = _env()
    env.reset(seed=0, options={"board": [[4, 4, 8, 0]] + EMPTY_ROWS})
    *_, reward, _terminated, _truncated, info = env.step("Left")
    # 4 + 4 -> 8; the new 8 does not merge again with the old 8: [8, 8, 0, 0], M = 8.
    assert _board_before_spawn(info) == [[8, 8, 0, 0]] + EMPTY_ROWS
    assert info["merge_score"] == 8
    assert reward == pytest.approx(REWARD_M8, abs=1e-15)


def test_illegal_move_leaves_board_and_rng_unchanged() -> None:
    env = _env()
    board = [[2, 4, 8, 16]] + EMPTY_ROWS  # nothing can slide or merge to the left
    obs0, _ = env.reset(seed=3, options={"board": board})
    rng0 = copy.deepcopy(env.np_random.bit_generator.state)
    obs, reward, terminated, truncated, info = env.step("Left")
    assert info["board"] == board
    assert env.np_random.bit_generator.state == rng0, "an illegal move must not draw a spawn"
    assert obs == obs0
    assert reward == pytest.approx(-0.1) and reward == env.config["illegal_move_reward"]
    assert info["action_is_valid"] is True and info["action_is_effective"] is False
    assert info["spawn"] is None and info["merge_score"] == 0
    assert not terminated and not truncated
    # A configured penalty is used as given.
    env = _env(illegal_move_reward=-0.5)
    env.reset(seed=3, options={"board": board})
    assert env.step("left")[1] == -0.5


HAND = [[2, 0, 2, 4], [0, 4, 4, 0], [8, 0, 0, 8], [2, 2, 2, 0]]


@pytest.mark.parametrize(
    ("name", "expected", "merged"),
    [
        # Rows slide left: 2 . 2 4 -> 4 4 (2+2), 4 4 -> 8, 8 8 -> 16, 2 2 2 -> 4 2 (the wall-side pair).
        ("Left", [[4, 4, 0, 0], [8, 0, 0, 0], [16, 0, 0, 0], [4, 2, 0, 0]], 4 + 8 + 16 + 4),
        # Rows slide right: the pair nearest the right wall merges: 2 . 2 4 -> . . 4 4; 2 2 2 . -> . . 2 4.
        ("Right", [[0, 0, 4, 4], [0, 0, 0, 8], [0, 0, 0, 16], [0, 0, 2, 4]], 4 + 8 + 16 + 4),
        # Columns slide up: 2 . 8 2 -> 2 8 2 .; . 4 . 2 -> 4 2; 2 4 . 2 -> 2 4 2; 4 . 8 . -> 4 8. No merges.
        ("Up", [[2, 4, 2, 4], [8, 2, 4, 8], [2, 0, 2, 0], [0, 0, 0, 0]], 0),
        # Columns slide down, order kept: 2 . 8 2 -> . 2 8 2; . 4 . 2 -> . . 4 2; 2 4 . 2 -> . 2 4 2; 4 . 8 . -> . . 4 8.
        ("Down", [[0, 0, 0, 0], [2, 0, 2, 0], [8, 4, 4, 4], [2, 2, 2, 8]], 0),
    ],
)
def test_hand_checked_moves_in_all_four_directions(name: str, expected: list, merged: int) -> None:
    after, score = move(_flat(HAND), name)
    assert after == _flat(expected) and score == merged
    env = _env()
    env.reset(seed=1, options={"board": HAND})
    *_, reward, _t, _tr, info = env.step(name)
    assert _board_before_spawn(info) == expected
    assert info["merge_score"] == merged
    assert reward == pytest.approx(0.1 * math.log2(merged + 1) if merged else 0.0, abs=1e-15)


# -------------------------------------------------------------------- rules
def test_slide_line_cases() -> None:
    assert slide_line((2, 2, 2, 2)) == ((4, 4, 0, 0), 8)
    assert slide_line((4, 4, 8, 0)) == ((8, 8, 0, 0), 8)
    assert slide_line((0, 2, 0, 2)) == ((4, 0, 0, 0), 4)
    assert slide_line((2, 0, 4, 0)) == ((2, 4, 0, 0), 0)
    assert slide_line((8, 8, 8, 0)) == ((16, 8, 0, 0), 16)
    assert slide_line((2, 4, 2, 4)) == ((2, 4, 2, 4), 0)
    assert slide_line((4, 4, 4, 4)) == ((8, 8, 0, 0), 16)


def test_merge_reward_is_ragens_log_formula() -> None:
    assert merge_reward(0) == 0.0
    assert merge_reward(4) == pytest.approx(0.1 * math.log2(5))
    assert merge_reward(8) == pytest.approx(REWARD_M8)
    assert merge_reward(2048) == pytest.approx(0.1 * math.log2(2049))


_tiles = st.sampled_from([0, 0, 0, 2, 4, 8, 16, 32])


@settings(max_examples=300, deadline=None)
@given(board=st.lists(_tiles, min_size=16, max_size=16))
def test_moves_conserve_the_tile_sum_and_mirror(board: list[int]) -> None:
    b = tuple(board)
    mirror = tuple(b[r * 4 + (3 - c)] for r in range(4) for c in range(4))
    transpose = tuple(b[c * 4 + r] for r in range(4) for c in range(4))
    for name in MOVES:
        after, score = move(b, name)
        assert sum(after) == sum(b)
        assert score % 4 == 0 and score <= sum(b)  # every merged tile is a power of two >= 4
        assert (score > 0) <= (
            sum(v != 0 for v in after) < sum(v != 0 for v in b)
        )  # a merge removes a tile
    # Right is Left of the mirrored board mirrored back; Up is Left of the transpose.
    left_m, s1 = move(mirror, "Left")
    right, s2 = move(b, "Right")
    assert tuple(left_m[r * 4 + (3 - c)] for r in range(4) for c in range(4)) == right and s1 == s2
    left_t, s3 = move(transpose, "Left")
    up, s4 = move(b, "Up")
    assert tuple(left_t[c * 4 + r] for r in range(4) for c in range(4)) == up and s3 == s4
    assert legal_moves(b) == [m for m in MOVES if move(b, m)[0] != b]


def test_spawns_come_from_env_rng_in_documented_order() -> None:
    """Cell = ``integers(n_empty)`` over the empty cells in row-major order, then value 2
    when ``random() < 0.9`` (RAGEN's draws), both from ``env.np_random``."""
    env = _env()
    env.reset(seed=11, options={"board": [[2, 0, 0, 0]] + EMPTY_ROWS})
    twin = copy.deepcopy(env.np_random)
    *_, info = env.step("Right")  # 2 slides to (0, 3)
    empty = [i for i in range(16) if i != 3]
    cell = empty[int(twin.integers(len(empty)))]
    value = 2 if twin.random() < 0.9 else 4
    assert info["spawn"] == {"cell": [cell // 4, cell % 4], "value": value}
    assert env.np_random.bit_generator.state == twin.bit_generator.state


def test_four_probability_is_one_in_ten() -> None:
    env = _env()
    fours = total = 0
    for seed in range(40):
        env.reset(seed=seed)
        for _ in range(30):
            name = best_move(env.board)
            if name is None or env.status.is_terminal:
                break
            *_, terminated, truncated, info = env.step(name)
            fours += info["spawn"]["value"] == 4
            total += 1
            if terminated or truncated:
                break
    # Binomial(total, 0.1): 5 standard deviations either side.
    sd = math.sqrt(total * 0.1 * 0.9)
    assert total > 1000 and abs(fours - 0.1 * total) < 5 * sd
    env = _env(two_probability=1.0)
    env.reset(seed=0, options={"board": [[2, 0, 0, 0]] + EMPTY_ROWS})
    assert env.step("Down")[4]["spawn"]["value"] == 2


def test_start_board_has_two_tiles_and_is_seeded() -> None:
    env = _env()
    obs_a, info_a = env.reset(seed=5)
    obs_b, info_b = _env().reset(seed=5)
    assert obs_a == obs_b and info_a == info_b
    tiles = [v for r in info_a["board"] for v in r if v]
    assert len(tiles) == 2 and set(tiles) <= {2, 4}
    assert info_a["score"] == 0 and info_a["target_tile"] == 128


def test_reaching_the_target_terminates_with_success() -> None:
    env = _env()  # target 128
    env.reset(seed=0, options={"board": [[64, 64, 0, 0]] + EMPTY_ROWS})
    _, reward, terminated, truncated, info = env.step("Left")
    assert terminated and not truncated and info["success"] and info["status"] == "success"
    assert info["max_tile"] == 128 and reward == pytest.approx(0.1 * math.log2(129))


def test_no_legal_move_terminates_with_failure() -> None:
    env = _env(target_tile=2048)
    # Only row 3 can move (right); the spawn lands on (3, 0) and nothing can merge after it.
    board = [[2, 4, 8, 16], [32, 64, 128, 256], [512, 1024, 2, 4], [8, 16, 32, 0]]
    env.reset(seed=0, options={"board": board})
    *_, reward, terminated, truncated, info = env.step("Right")
    assert info["board"][3][1:] == [8, 16, 32] and info["spawn"]["cell"] == [3, 0]
    assert terminated and not info["success"] and info["status"] == "failure"
    assert reward == 0.0
    assert "none (game over)" in env._observation()


def test_unparseable_action_is_invalid_and_case_is_ignored() -> None:
    env = _env()
    env.reset(seed=2)
    *_, reward, _t, _tr, info = env.step("slide left")
    assert info["action_is_valid"] is False and reward == -0.1 and "Up" in info["invalid_reason"]
    info = env.step("  dOwN ")[4]  # legal or not, it parses
    assert info["action_is_valid"] is True and info["action"] == "Down"


def test_bad_board_option_is_rejected() -> None:
    env = _env()
    with pytest.raises(ValueError, match="powers of two"):
        env.reset(seed=0, options={"board": [[3, 0, 0, 0]] + EMPTY_ROWS})
    with pytest.raises(ValueError, match="4 rows of 4"):
        env.reset(seed=0, options={"board": [[2, 0, 0]]})
    with pytest.raises(ValueError, match="already holds the target tile 128"):
        env.reset(seed=0, options={"board": [[128, 0, 0, 0]] + EMPTY_ROWS})
    with pytest.raises(ValueError, match="no move is legal"):
        env.reset(
            seed=0, options={"board": [[2, 4, 2, 4], [4, 2, 4, 2], [2, 4, 2, 4], [4, 2, 4, 2]]}
        )


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="target_tile"):
        ragen_envs.make("ragen/2048-v0", target_tile=100)
    with pytest.raises(ragen_envs.ConfigError, match="two_probability"):
        ragen_envs.make("ragen/2048-v0", two_probability=1.5)


def test_observation_grammar() -> None:
    env = _env(target_tile=256)
    obs, _ = env.reset(
        seed=0, options={"board": [[2, 0, 0, 16]] + [[0, 128, 0, 0]] + EMPTY_ROWS[:2]}
    )
    assert obs == (
        "  2   .   .  16\n"
        "  . 128   .   .\n"
        "  .   .   .   .\n"
        "  .   .   .   .\n"
        "Score: 0. Largest tile: 128. Target tile: 256.\n"
        "Moves that change the board: Up, Right, Down, Left"
    )
    assert render((0,) * 16) == "\n".join([". . . ."] * 4)


def test_splits_have_disjoint_start_boards() -> None:
    starts = {}
    for split in ragen_envs.SPLITS:
        env = _env(split=split)
        starts[split] = {tuple(map(tuple, env.reset(seed=s)[1]["board"])) for s in range(60)}
    assert not starts["train"] & starts["validation"]
    assert not starts["train"] & starts["test"]
    assert not starts["validation"] & starts["test"]


# --------------------------------------------------------------- baseline
def test_expectimax_plan_is_closed_loop_expectimax() -> None:
    """The look-ahead plan equals choosing ``best_move`` on each board as it comes."""
    env = _env("ragen/2048-Target64-v0")
    for seed in range(3):
        env.reset(seed=seed)
        plan = env.oracle_actions()
        played = []
        while not env.status.is_terminal and env.num_steps < env.config["max_steps"]:
            name = best_move(env.board)
            played.append(name)
            env.step(name)
            if not env.status.is_terminal:
                assert env.oracle_actions() == plan[len(played) :]
        assert played == plan


def test_expectimax_beats_random_on_target64() -> None:
    from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode

    env = ragen_envs.make("ragen/2048-Target64-v0")
    oracle = sum(run_episode(env, oracle_policy, seed=s).success for s in range(30))
    rand = sum(run_episode(env, make_random_policy(0), seed=s).success for s in range(30))
    assert oracle >= 27 and rand < oracle


def _plain_heuristic(board: tuple[int, ...]) -> float:
    """The heuristic as the module docstring defines it: the eight line scores (rows, then
    columns) added one by one."""
    total = 0.0
    for r in range(4):
        total += line_score(board[4 * r : 4 * r + 4])
    for c in range(4):
        total += line_score(board[c::4])
    return total


def _plain_chance(board: tuple[int, ...], depth: int, p2: float) -> float:
    """Textbook expectimax: every spawn's board built and scored from scratch."""
    empty = [i for i, v in enumerate(board) if v == 0]
    total = 0.0
    for i in empty:
        for value, p in ((2, p2), (4, 1.0 - p2)):
            if p > 0.0:
                child = board[:i] + (value,) + board[i + 1 :]
                if depth <= 1:
                    total += p * _plain_heuristic(child)
                else:
                    after = [move(child, m)[0] for m in MOVES]
                    best = max(
                        [_plain_chance(a, depth - 1, p2) for a in after if a != child] or [0.0]
                    )
                    total += p * best
    return total / len(empty)


def test_expectimax_search_values_equal_the_textbook_search_exactly() -> None:
    """The search reuses line scores (a spawn changes one row and one column); its values
    must equal, bit for bit, the plain search that scores every child board from scratch, so
    the baseline's moves (and the published success rates) are those of the definition."""
    import random

    from ragen_envs.envs.game2048.expectimax import _chance_node

    rng = random.Random(2048)
    compared = 0
    for _ in range(120):
        board = tuple(rng.choice([0, 0, 0, 2, 4, 8, 16, 32, 64, 128, 256]) for _ in range(16))
        assert heuristic(board) == _plain_heuristic(board)
        empty = board.count(0)
        for name in MOVES:
            after = move(board, name)[0]
            if after == board or 0 not in after:
                continue
            for p2 in (0.9, 1.0, 0.0):
                for depth in (1, 2) if empty <= 3 else (1,):
                    assert _chance_node(after, depth, p2) == _plain_chance(after, depth, p2)
                    compared += 1
    assert compared > 200
