"""FrozenLake: transition table, optimal policy, random maps, splits, rendering, actions.

Spec: docs/envs/frozenlake.md.  Hand-computed values are derived in the comments.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.envs.frozenlake import (
    ACTIONS,
    STANDARD_MAPS,
    FrozenLakeEnv,
    FrozenMap,
    build_dynamics,
    solve,
    value_iteration,
)
from ragen_envs.seeding import SPLITS, instance_split

LEFT, DOWN, RIGHT, UP = range(4)


def _distribution(env: FrozenLakeEnv, state: int, action: int) -> dict[int, float]:
    """P(s' | s, a) summed from the env's own transition table."""
    out: dict[int, float] = {}
    for prob, nxt, _reward, _term in env.transitions[state][action]:
        out[nxt] = out.get(nxt, 0.0) + prob
    return out


# ---------------------------------------------------------------- must show
def test_standard_4x4_one_third_left_from_state_0_read_from_table() -> None:
    """Foundation issue: from state 0 of the standard 4x4 map with success_rate 1/3,
    Left stays with probability 2/3 (intended Left and perpendicular Up both hit the
    edge) and moves Down to state 4 with probability 1/3."""
    env = ragen_envs.make("ragen/FrozenLake-Standard4x4-v0", success_rate=1 / 3).unwrapped
    env.reset(seed=0)
    assert env.lake.rows == ("SFFF", "FHFH", "FFFH", "HFFG")
    assert env.state == 0
    dist = _distribution(env, 0, LEFT)
    assert set(dist) == {0, 4}
    assert dist[0] == pytest.approx(2 / 3, abs=1e-12)
    assert dist[4] == pytest.approx(1 / 3, abs=1e-12)
    for _prob, _nxt, reward, terminated in env.transitions[0][LEFT]:
        assert reward == 0.0 and terminated is False


def test_standard_maps_are_gymnasiums() -> None:
    for name, preset in (("4x4", "Standard4x4"), ("8x8", "Standard8x8")):
        env = ragen_envs.make(f"ragen/FrozenLake-{preset}-v0").unwrapped
        _, info = env.reset(seed=5)
        assert env.lake.rows == STANDARD_MAPS[name]
        n = env.lake.nrow
        assert info["start"] == [0, 0] and info["goal"] == [n - 1, n - 1]
        assert env.config["success_rate"] == pytest.approx(1 / 3)


# ----------------------------------------------------- transition table laws
@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    size=st.sampled_from([3, 4, 8]),
    success_rate=st.sampled_from([0.0, 0.2, 1 / 3, 0.5, 0.8, 1.0]),
)
def test_transition_probabilities_sum_to_one_and_never_go_backwards(
    seed: int, size: int, success_rate: float
) -> None:
    env = FrozenLakeEnv(size=size, success_rate=success_rate)
    env.reset(seed=seed)
    m, dyn = env.lake, env.dynamics
    fail = (1 - success_rate) / 2
    for s in range(m.n_states):
        terminal = m.tile(s) in "HG"
        for a in range(4):
            entries = env.transitions[s][a]
            assert math.fsum(p for p, *_ in entries) == pytest.approx(1.0, abs=1e-12)
            if terminal:
                assert entries == ((1.0, s, 0.0, True),)
                continue
            dirs = dyn.directions[s][a]
            assert (a + 2) % 4 not in dirs, "never backwards"
            for (prob, nxt, reward, term), d in zip(entries, dirs):
                assert prob == pytest.approx(success_rate if d == a else fail)
                assert reward == (1.0 if m.tile(nxt) == "G" else 0.0)
                assert term == (m.tile(nxt) in "HG")
                # the entry moves one cell in direction d, or stays at the edge
                r, c = m.coords(s)
                dr, dc = ((0, -1), (1, 0), (0, 1), (-1, 0))[d]
                rr, cc = min(max(r + dr, 0), m.nrow - 1), min(max(c + dc, 0), m.ncol - 1)
                assert nxt == rr * m.ncol + cc


def test_sampled_steps_follow_the_table() -> None:
    """Left from state 0 of the standard 4x4 map (success_rate 1/3) over many seeds:
    the share of moves to state 4 matches 1/3 within 4 binomial standard deviations."""
    env = FrozenLakeEnv(map_name="4x4", success_rate=1 / 3)
    n, down = 3000, 0
    for seed in range(n):
        env.reset(seed=seed)
        _, _, _, _, info = env.step("Left")
        down += info["position"] == [1, 0]
        assert info["position"] in ([0, 0], [1, 0])
        assert info["slipped"] == (info["direction"] != "Left")
    assert abs(down / n - 1 / 3) <= 4 * math.sqrt((1 / 3) * (2 / 3) / n)


# ------------------------------------------------------------ optimal policy
# Hand map:   H S H      states 0 1 2
#             F G F             3 4 5
# From S (state 1), with p = success_rate and q = (1 - p) / 2:
#   Down : G with p, holes with 2q                        -> Q = p
#   Left : hole with p, G with q, stay (edge) with q      -> Q = q + q V(S)
#   Right: symmetric to Left
#   Up   : stay with p, holes with 2q                     -> Q = p V(S)
# so V(S) = max(p, q / (1 - q)) = max(p, (1 - p) / (1 + p)).
# From state 3 (row 1, col 0): Down stays with p + q (edge below and left) and reaches G
# with q, so V = 1 for p < 1 (and Right reaches G when p = 1); state 5 is symmetric.  Holes and the goal are terminal: V = 0.
HAND = ("HSH", "FGF")


@pytest.mark.parametrize(
    ("p", "v_start", "best"),
    [
        (
            Fraction(1, 3),
            Fraction(1, 2),
            "Left",
        ),  # max(1/3, (2/3)/(4/3) = 1/2); Left/Right tie -> Left
        (Fraction(4, 5), Fraction(4, 5), "Down"),  # max(4/5, (1/5)/(9/5) = 1/9)
        (Fraction(1, 2), Fraction(1, 2), "Down"),  # max(1/2, (1/2)/(3/2) = 1/3)
        (Fraction(1), Fraction(1), "Down"),  # deterministic
    ],
)
def test_optimal_values_on_hand_map(p: Fraction, v_start: Fraction, best: str) -> None:
    fmap = FrozenMap(HAND)
    sol = solve(fmap, float(p))
    expected = [0, v_start, 0, 1, 0, 1]
    np.testing.assert_allclose(sol.values, [float(x) for x in expected], atol=1e-12)
    # the same values by plain undiscounted value iteration
    T, R = build_dynamics(fmap, float(p)).matrices()
    V, Q, _ = value_iteration(T, R)
    np.testing.assert_allclose(V, [float(x) for x in expected], atol=1e-9)
    q = (1 - p) / 2
    np.testing.assert_allclose(
        sol.q_values[1],
        [float(q + q * v_start), float(p), float(q + q * v_start), float(p * v_start)],
        atol=1e-12,
    )
    assert ACTIONS[int(sol.policy[1])] == best


@pytest.mark.parametrize(
    ("name", "rate"), [("4x4", 1 / 3), ("4x4", 0.8), ("8x8", 1 / 3), ("8x8", 0.8)]
)
def test_policy_iteration_matches_value_iteration(name: str, rate: float) -> None:
    fmap = FrozenMap(STANDARD_MAPS[name])
    T, R = build_dynamics(fmap, rate).matrices()
    V, _, _ = value_iteration(T, R)
    np.testing.assert_allclose(solve(fmap, rate).values, V, atol=1e-8)


def _bfs(rows: tuple[str, ...], start: tuple[int, int], goal: tuple[int, int]) -> int | None:
    """Independent shortest-path length (test-local breadth-first search)."""
    frontier, seen, d = [start], {start}, 0
    while frontier:
        if goal in frontier:
            return d
        nxt = []
        for r, c in frontier:
            for rr, cc in ((r + 1, c), (r - 1, c), (r, c + 1), (r, c - 1)):
                if (
                    0 <= rr < len(rows)
                    and 0 <= cc < len(rows[0])
                    and rows[rr][cc] != "H"
                    and (rr, cc) not in seen
                ):
                    seen.add((rr, cc))
                    nxt.append((rr, cc))
        frontier, d = nxt, d + 1
    return None


@pytest.mark.parametrize("env_id", ["ragen/FrozenLake-v0", "ragen/FrozenLake-8x8-v0"])
def test_every_random_map_has_a_path_and_the_plan_is_shortest(env_id: str) -> None:
    env = ragen_envs.make(env_id).unwrapped
    for seed in range(200):
        _, info = env.reset(seed=seed)
        rows = tuple(info["map"])
        length = _bfs(rows, tuple(info["start"]), tuple(info["goal"]))
        assert length is not None and length >= 1
        plan = env.oracle_actions()
        assert len(plan) == length
        for action in plan[:-1]:
            _, reward, terminated, _, _ = env.step(action)
            assert reward == 0.0 and not terminated
        _, reward, terminated, _, info = env.step(plan[-1])
        assert (reward, terminated, info["success"]) == (1.0, True, True)


@pytest.mark.parametrize(
    ("env_id", "n"),
    [("ragen/FrozenLake-Slippery-v0", 400), ("ragen/FrozenLake-Standard4x4-v0", 400)],
)
def test_slippery_oracle_success_matches_optimal_value(env_id: str, n: int) -> None:
    """Maximum expected return: over n seeds the oracle's success count is within
    4 standard deviations of sum_i V*(start_i) (independent Bernoulli episodes).  A long
    step limit makes the finite episodes match the unbounded-horizon values."""
    env = ragen_envs.make(env_id, max_steps=2000).unwrapped
    assert env.oracle_is_exact is False
    successes, expected, var = 0, 0.0, 0.0
    for seed in range(n):
        env.reset(seed=seed)
        v = env.optimal_return()
        expected += v
        var += v * (1 - v)
        while True:
            (action,) = env.oracle_actions()
            _, reward, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                break
        assert not truncated
        successes += info["success"]
        assert reward == (1.0 if info["success"] else 0.0)
    assert abs(successes - expected) <= 4 * math.sqrt(var) + 1
    if env_id.endswith("Standard4x4-v0"):
        assert expected / n == pytest.approx(
            0.8235294117647, abs=1e-9
        )  # V*(0), same map every seed


# --------------------------------------------------------- maps and splits
def test_splits_are_disjoint_and_keyed_on_the_map() -> None:
    keys: dict[str, set[bytes]] = {}
    for split in SPLITS:
        env = FrozenLakeEnv(split=split)
        keys[split] = set()
        for seed in range(150):
            env.reset(seed=seed)
            key = env.lake.key()
            assert instance_split(key) == split
            keys[split].add(key)
    assert not (keys["train"] & keys["validation"])
    assert not (keys["train"] & keys["test"])
    assert not (keys["validation"] & keys["test"])
    assert min(len(v) for v in keys.values()) > 50


def test_random_maps_use_size_and_p() -> None:
    env = FrozenLakeEnv(size=8, p=0.5)
    holes = 0
    for seed in range(100):
        env.reset(seed=seed)
        assert env.lake.nrow == env.lake.ncol == 8
        holes += len(env.lake.holes)
    assert holes / (100 * 62) > 0.2  # many holes at p = 0.5 (path rejection lowers the share)
    env = FrozenLakeEnv(size=4, p=1.0)
    env.reset(seed=1)
    assert env.lake.holes == ()


def test_same_seed_same_map_and_start_is_random() -> None:
    a, b = FrozenLakeEnv(), FrozenLakeEnv()
    starts = set()
    for seed in range(50):
        oa, ia = a.reset(seed=seed)
        ob, ib = b.reset(seed=seed)
        assert (oa, ia) == (ob, ib)
        starts.add(tuple(ia["start"]))
    assert len(starts) > 5


# ------------------------------------------------------------- rendering
def test_rendering_symbols_and_formats() -> None:
    env = FrozenLakeEnv(desc=["SFH", "FFG"], observation_format="grid_coord")
    obs, _ = env.reset(seed=0)
    assert obs == (
        "Coordinates:\n"
        "Board size: 2 rows x 3 cols (zero-indexed).\n"
        "Start: (0, 0)\nGoal: (1, 2)\nPlayer: (0, 0)\nHoles: (0, 2)\n"
        "Grid Map:\nP_O\n__G"
    )
    env.step("Right")
    obs, reward, terminated, _, info = env.step("right")
    assert obs.endswith("Player in hole: (0, 2)\nHoles: (0, 2)\nGrid Map:\n__X\n__G")
    assert (reward, terminated, info["success"], info["status"]) == (0.0, True, False, "failure")

    env = FrozenLakeEnv(desc=["SFH", "FFG"], observation_format="grid")
    env.reset(seed=0)
    env.step("Down")
    env.step("Right")
    obs, reward, terminated, _, info = env.step("RIGHT")
    assert obs == "__O\n__\u221a"
    assert (reward, terminated, info["success"], info["status"]) == (1.0, True, True, "success")

    env = FrozenLakeEnv(desc=["SFH", "FFG"], observation_format="coord")
    obs, _ = env.reset(seed=0)
    assert obs.startswith("Board size: 2 rows x 3 cols") and "Grid Map" not in obs


def test_instruction_has_legend_rules_and_example() -> None:
    text = FrozenLakeEnv(success_rate=0.8).instruction
    for needle in (
        "P = you",
        "O = hole",
        "G = goal",
        "\u221a",
        "X = ",
        "Left, Down, Right, Up",
        "probability 0.8",
        "0.1",
        "<answer>Left || Down</answer>",
    ):
        assert needle in text
    assert "not slippery" in FrozenLakeEnv().instruction


# -------------------------------------------------------------- actions
def test_actions_case_insensitive_edge_bump_and_invalid_action() -> None:
    env = FrozenLakeEnv(desc=["SF", "FG"], max_steps=3)
    obs0, _ = env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step("  uP ")
    assert (obs, reward, terminated, info["action"], info["action_is_effective"]) == (
        obs0,
        0.0,
        False,
        "Up",
        False,
    )
    obs, reward, terminated, truncated, info = env.step("jump")
    assert obs == obs0 and reward == -0.1 and not terminated and not truncated
    assert info["action_is_valid"] is False and info["position"] == [0, 0]
    obs, reward, terminated, truncated, info = env.step("Left, Up")
    assert info["action_is_valid"] is False and truncated and info["status"] == "step_limit"


def test_config_errors_name_the_field() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="desc"):
        FrozenLakeEnv(desc=["SS", "FG"])
    with pytest.raises(ragen_envs.ConfigError, match="desc"):
        FrozenLakeEnv(desc=["SFG"], map_name="4x4")
    with pytest.raises(ragen_envs.ConfigError, match="success_rate"):
        ragen_envs.make("ragen/FrozenLake-v0", success_rate=1.5)
    with pytest.raises(ragen_envs.ConfigError, match="map_name"):
        ragen_envs.make("ragen/FrozenLake-v0", map_name="5x5")


def test_oracle_is_exact_only_when_deterministic() -> None:
    assert ragen_envs.make("ragen/FrozenLake-v0").unwrapped.oracle_is_exact is True
    for preset in ("Slippery", "Standard4x4", "Standard8x8"):
        assert ragen_envs.make(f"ragen/FrozenLake-{preset}-v0").unwrapped.oracle_is_exact is False
