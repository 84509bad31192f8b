"""2x2x2 Rubik's Cube: turns, the net, scrambles, the optimal solver against an
independent breadth-first search, and rejection of unsolvable sticker states.

Spec: docs/envs/rubikscube.md.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
from ragen_envs.envs.rubikscube import (
    ACTIONS,
    MOVES,
    SOLVED,
    apply,
    check_state,
    is_solved,
    parse_state,
    solve,
)
from ragen_envs.envs.rubikscube.cube import (
    COLOURS,
    CORNER_STICKERS,
    CUBIE_COLOURS,
    ROTATIONS,
    apply_permutation,
    canonical,
)
from ragen_envs.envs.rubikscube.solver import FIXED_TURNS, distance, level_sizes

#: Positions of the 2x2x2 at each quarter-turn distance from solved (up to whole-cube
#: rotations): Jaap Scherphuis, "Pocket Cube" (jaapsch.net/puzzles/cube2.htm), QTM table.
PUBLISHED_LEVELS = [
    1,
    6,
    27,
    120,
    534,
    2256,
    8969,
    33058,
    114149,
    360508,
    930588,
    1350852,
    782536,
    90280,
    276,
]

#: Radius of the independent search; scrambles of the depth presets up to 5 turns are
#: within it.
BFS_RADIUS = 6


def _text(state: bytes) -> str:
    return "".join(COLOURS[c] for c in state)


def _random_state(rng: np.random.Generator, turns: int) -> bytes:
    state = SOLVED
    for _ in range(turns):
        state = apply(state, ACTIONS[int(rng.integers(12))])
    return state


@pytest.fixture(scope="module")
def bfs_distances() -> dict[bytes, int]:
    """Plain breadth-first search over sticker states, independent of the solver's
    table, coordinates and canonical forms: the sources are the 24 orientations of the
    solved cube, the edges the 12 sticker permutations, the radius :data:`BFS_RADIUS`."""
    dist = {apply_permutation(SOLVED, rot): 0 for rot in ROTATIONS}
    assert len(dist) == 24
    frontier = list(dist)
    for level in range(1, BFS_RADIUS + 1):
        nxt = []
        for state in frontier:
            for perm in MOVES.values():
                child = bytes(state[i] for i in perm)
                if child not in dist:
                    dist[child] = level
                    nxt.append(child)
        frontier = nxt
    return dist


# ----------------------------------------------------------------- must show
@pytest.mark.parametrize("name", ACTIONS)
def test_every_action_inverse_restores_the_state(name: str) -> None:
    inverse = name[0] if name.endswith("'") else name + "'"
    rng = np.random.default_rng(0)
    for state in [SOLVED] + [_random_state(rng, 20) for _ in range(20)]:
        turned = apply(state, name)
        assert turned != state
        assert apply(turned, inverse) == state
        assert apply(apply(apply(apply(state, name), name), name), name) == state  # order 4
        # RAGEN: a prime move is three clockwise turns.
        base = name[0]
        assert apply(state, base + "'") == apply(apply(apply(state, base), base), base)


def test_oracle_length_equals_bfs_distance_on_200_seeds(
    bfs_distances: dict[bytes, int],
) -> None:
    checked = 0
    for env_id in (
        "ragen/RubiksCube-v0",
        "ragen/RubiksCube-Depth2-v0",
        "ragen/RubiksCube-Depth3-v0",
        "ragen/RubiksCube-Depth5-v0",
    ):
        env = ragen_envs.make(env_id)
        for seed in range(50):
            _, info = env.reset(seed=seed)
            state = parse_state(info["state"])
            want = bfs_distances[state]  # depth <= 5 <= BFS_RADIUS: always found
            plan = env.unwrapped.oracle_actions()
            assert len(plan) == want == info["optimal_distance"], (env_id, seed)
            result = run_episode(env, oracle_policy, seed=seed)
            assert result.success and len(result.actions) == want
            checked += 1
    assert checked == 200


def test_deep_scrambles_are_solved_and_beyond_the_bfs_ball(
    bfs_distances: dict[bytes, int],
) -> None:
    """Scrambles deeper than the search radius: the oracle's plan solves, its length is
    the table distance, each turn lowers that distance by one, and a state the BFS did
    not reach has a distance above its radius."""
    env = ragen_envs.make("ragen/RubiksCube-Scrambled-v0")
    for seed in range(40):
        _, info = env.reset(seed=seed)
        state = parse_state(info["state"])
        plan = env.unwrapped.oracle_actions()
        assert len(plan) == info["optimal_distance"] <= 14
        if state in bfs_distances:
            assert bfs_distances[state] == len(plan)
        else:
            assert len(plan) > BFS_RADIUS
        d = len(plan)
        for name in plan:
            state = apply(state, name)
            d -= 1
            assert distance(state) == d
        assert is_solved(state)


def test_each_action_is_a_fixed_turn_up_to_a_whole_cube_rotation() -> None:
    """The solver explores with U, R, F and inverses only; that is exact because each of
    the twelve actions leads to the same position (canonical form) as one of them."""
    rng = np.random.default_rng(5)
    states = [_random_state(rng, 25) for _ in range(20)]
    for name in ACTIONS:
        partners = {
            m
            for m in FIXED_TURNS
            if all(canonical(apply(s, name)) == canonical(apply(s, m)) for s in states)
        }
        assert len(partners) == 1, (name, partners)


def test_solver_table_level_sizes_match_published_counts() -> None:
    assert level_sizes() == PUBLISHED_LEVELS
    assert sum(PUBLISHED_LEVELS) == 3_674_160


def _twist_one_corner(state: bytes) -> bytes:
    # Stickers 2 (U), 8 (F), 5 (L) form the U-F-L corner; cycling them twists that cubie.
    s = bytearray(state)
    s[2], s[8], s[5] = state[5], state[2], state[8]
    return bytes(s)


@pytest.mark.parametrize(
    ("stickers", "match"),
    [
        (_text(SOLVED)[:-1], "24 stickers, got 23"),
        ("WWWW OOOO GGGG RRRR BBBB YYYX", "unknown sticker letter"),
        ("WWWW OOOO GGGG RRRR BBBB YYYW", r"exactly 4 stickers \(W=5, Y=3\)"),
        (_text(_twist_one_corner(SOLVED)), "twisted corner"),
        (_text(_twist_one_corner(apply(apply(SOLVED, "R"), "U'"))), "twisted corner"),
        # Swap two stickers of one corner: W and G change places on the U-F-L corner -> mirror image.
        ("WWGW OOOO WGGG RRRR BBBB YYYY", "no corner of the cube"),
        # Green and blue swapped on one sticker each: mirrored corners.
        ("WWWW OOOO GGGB RRRR BBBG YYYY", "no corner of the cube"),
        # A front sticker of U-F-L and a down sticker of D-F-L swapped: white and yellow on one corner.
        ("WWWW OOOO YGGG RRRR BBBB GYYY", "no corner of the cube"),
        (_text(SOLVED), "already solved"),
    ],
)
def test_unsolvable_sticker_state_is_rejected(stickers: str, match: str) -> None:
    with pytest.raises(ragen_envs.ConfigError, match=match) as err:
        ragen_envs.make("ragen/RubiksCube-v0", initial_state=stickers)
    assert err.value.field == "initial_state"


def test_duplicate_cubie_is_rejected() -> None:
    # Corners U-F-R and D-B-L get copies of U-F-L and D-B-R: every colour still shows 4
    # times and every corner is a real cubie, but two cubies appear twice.
    cubie_at = [0, 0, 2, 3, 4, 5, 7, 7]  # corner positions in CORNERS order (U layer first)
    state = bytearray(24)
    for slot, cubie in zip(CORNER_STICKERS, cubie_at):
        for i, colour in zip(slot, CUBIE_COLOURS[cubie]):
            state[i] = colour
    with pytest.raises(ragen_envs.ConfigError, match="appears twice"):
        ragen_envs.make("ragen/RubiksCube-v0", initial_state=_text(bytes(state)))


def test_valid_user_state_is_played_and_odd_corner_permutations_are_fine() -> None:
    # One quarter turn is a 4-cycle of corners (an odd permutation): no parity condition.
    state = apply(apply(apply(SOLVED, "R"), "U"), "F'")
    env = ragen_envs.make("ragen/RubiksCube-v0", initial_state=" ".join(_text(state)))
    obs, info = env.reset(seed=123)
    assert (
        info["state"] == _text(state) and info["scramble"] == [] and info["optimal_distance"] == 3
    )
    result = run_episode(env, oracle_policy, seed=0)
    assert result.success and len(result.actions) == 3 and result.episode_return == 1.0


def test_net_rendering_after_u() -> None:
    env = ragen_envs.make("ragen/RubiksCube-v0", initial_state=_text(apply(SOLVED, "U")))
    obs, _ = env.reset(seed=0)
    # U turns the top layer clockwise seen from above: the front's top row moves to the left face.
    assert obs == ("     W W\n     W W\nG G  R R  B B  O O\nO O  G G  R R  B B\n     Y Y\n     Y Y")


def test_net_rendering_after_r_and_f() -> None:
    # R: the front's right column goes up to U; U's right column goes to the back (left column as seen from behind).
    assert _text(apply(SOLVED, "R")) == "WGWGOOOOGYGYRRRRWBWBYBYB"
    # F: U's bottom row goes to R's left column; L's right column gets D's top row.
    assert _text(apply(SOLVED, "F")) == "WWOOOYOYGGGGWRWRBBBBRRYY"


def test_solved_in_any_orientation_and_canonical_form() -> None:
    for rot in ROTATIONS:
        turned = apply_permutation(SOLVED, rot)
        assert is_solved(turned) and canonical(turned) == SOLVED and distance(turned) == 0
    assert not is_solved(apply(SOLVED, "B"))


@settings(max_examples=60, deadline=None)
@given(turns=st.lists(st.sampled_from(ACTIONS), max_size=30))
def test_reachable_states_pass_the_checks_and_solve(turns: list[str]) -> None:
    state = SOLVED
    for name in turns:
        state = apply(state, name)
    check_state(state)
    plan = solve(state)
    assert len(plan) <= min(len(turns), 14)
    for name in plan:
        state = apply(state, name)
    assert is_solved(state)


def test_scramble_is_seeded_never_solved_and_replays() -> None:
    env = ragen_envs.make("ragen/RubiksCube-Depth3-v0").unwrapped
    for seed in range(30):
        obs, info = env.reset(seed=seed)
        state = SOLVED
        for name in info["scramble"]:
            state = apply(state, name)
        assert _text(state) == info["state"] and not is_solved(state)
        assert len(info["scramble"]) == 3 and 1 <= info["optimal_distance"] <= 3
        for a, b in zip(info["scramble"], info["scramble"][1:]):
            assert b != (a[0] if a.endswith("'") else a + "'"), (
                "a scramble turn never undoes the previous one"
            )
        again = ragen_envs.make("ragen/RubiksCube-Depth3-v0").reset(seed=seed)
        assert again == (obs, info)


def test_splits_have_disjoint_states() -> None:
    seen = {}
    for split in ragen_envs.SPLITS:
        env = ragen_envs.make("ragen/RubiksCube-Depth2-v0", split=split)
        seen[split] = {env.reset(seed=s)[1]["state"] for s in range(60)}
        assert seen[split]
    assert not seen["train"] & seen["validation"] and not seen["train"] & seen["test"]
    assert not seen["validation"] & seen["test"]
    # Depth 1 has only 12 states; every split still gets some (8 / 2 / 2).
    for split, n in (("train", 8), ("validation", 2), ("test", 2)):
        env = ragen_envs.make("ragen/RubiksCube-v0", split=split)
        assert len({env.reset(seed=s)[1]["state"] for s in range(200)}) == n


def test_rewards_and_action_spellings() -> None:
    env = ragen_envs.make(
        "ragen/RubiksCube-v0", initial_state=_text(apply(apply(SOLVED, "R"), "R"))
    )
    env.reset(seed=0)
    *_, reward, terminated, _truncated, info = env.step("r")
    assert reward == 0.0 and not terminated and info["action"] == "R" and info["distance"] == 1
    *_, reward, terminated, _truncated, info = env.step("R2")
    assert not info["action_is_valid"] and reward == -0.1 and not terminated
    for spelling in ("Ri", "r'", "R\u2019"):
        env.reset(seed=0)
        assert env.step(spelling)[4]["action"] == "R'"
    env.reset(seed=0)
    env.step("R")
    *_, reward, terminated, _truncated, info = env.step("R")
    assert reward == 1.0 and terminated and info["success"] and info["status"] == "success"


def test_step_limit_is_ragens_20() -> None:
    # Turning U never solves a cube scrambled by R (R is no power of U, even up to rotation).
    env = ragen_envs.make("ragen/RubiksCube-v0", initial_state=_text(apply(SOLVED, "R")))
    env.reset(seed=0)
    for k in range(1, 21):
        *_, terminated, truncated, info = env.step("U")
        assert not terminated and truncated is (k == 20)
    assert info["status"] == "step_limit" and info["episode_return"] == 0.0
