"""Issue 21 (env speed): the fast paths give exactly what the general paths give.

Each shortcut taken to make a step or reset cheap is checked here against the slower
rule it replaces, so speed never changes behaviour: the raw PCG64 coin (Bandit), the
shared reusable transitions, the action look-up table, Sokoban's template render, the
Countdown checker's fast parser, and the info contract on every step of every id.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.baselines import make_random_policy, run_episode
from ragen_envs.core import Transition, raw_threshold, raw_uniform
from ragen_envs.envs.countdown.checker import _check_ast, _check_fast
from ragen_envs.envs.sokoban.render import render_grid

from .conftest import ALL_IDS


# ------------------------------------------------------------------ the raw coin
@pytest.mark.parametrize("p", [0.25, 0.0, 1.0, 0.5, 1e-12, 1 - 1e-16, 0.1, 2.0, -1.0])
def test_env_speed_raw_coin_is_the_generator_coin(p: float) -> None:
    a, b = np.random.default_rng(123), np.random.default_rng(123)
    raw, t = raw_uniform(b), raw_threshold(p)
    assert raw is not None and t is not None
    for _ in range(20000):
        assert (a.random() < p) == (raw() < t)
    assert a.random() == b.random()  # both generators are at the same place afterwards


def test_env_speed_raw_coin_exact_at_the_boundary() -> None:
    # u = (raw >> 11) * 2**-53 < p must agree with raw < threshold for raw next to it.
    for p in (0.25, 0.3, 1 / 3, 0.999):
        t = raw_threshold(p)
        for raw in (t - 1, t, t - (1 << 11), t + (1 << 11) - 1):
            assert ((raw >> 11) * 2.0**-53 < p) == (raw < t)


def test_env_speed_raw_coin_only_for_pcg64() -> None:
    assert raw_uniform(np.random.Generator(np.random.MT19937(0))) is None
    assert raw_threshold(float("nan")) is None


def test_env_speed_bandit_rewards_follow_np_random() -> None:
    """Bandit's reward stream equals ``np_random.random() < risky_prob`` per seed."""
    env = ragen_envs.make("ragen/Bandit-v0").unwrapped
    for seed in range(400):
        env.reset(seed=seed)
        shadow = np.random.Generator(np.random.PCG64())
        shadow.bit_generator.state = env.np_random.bit_generator.state
        _, reward, *_ = env.step(env.oracle_actions()[0])
        assert reward == (1.0 if shadow.random() < 0.25 else 0.0)
        assert env.np_random.bit_generator.state == shadow.bit_generator.state


def test_env_speed_bandit_fresh_info_each_step() -> None:
    """Shared transitions: the info a caller gets is its own dict, however it is changed."""
    env = ragen_envs.make("ragen/Bandit-v0").unwrapped
    env.reset(seed=0)
    _, _, _, _, first = env.step(env.oracle_actions()[0])
    first["arm"] = "tampered"
    first.clear()
    env.reset(seed=0)
    _, _, _, _, second = env.step(env.oracle_actions()[0])
    assert second["arm"] != "tampered" and second["step"] == 1 and second["status"] in {"success", "failure"}
    assert list(second)[:6] == ["action_is_valid", "action_is_effective", "success", "status", "step", "episode_return"]


def test_env_speed_reusable_transition_info_matches_literal() -> None:
    tr = Transition(reward=1, terminated=True, success=True, info={"arm": "x"})
    assert tr.template is None
    assert tr.reusable() is tr
    assert list(tr.template) == ["action_is_valid", "action_is_effective", "success", "status", "step",
                                 "episode_return", "arm"]
    assert type(tr.reward) is float and type(tr.terminated) is bool


# ------------------------------------------------------------ action look-up table
@pytest.mark.parametrize("text", ["Up", "up", "  UP\n", "uP ", "Upp", "", "Left", "RIGHT", "ß", "Down Up"])
def test_env_speed_match_action_table_is_the_casefold_rule(text: str) -> None:
    env = ragen_envs.make("ragen/Sokoban-v0").unwrapped
    key = text.strip().casefold()
    expected = next((n for n in env.action_names if n.casefold() == key), None)
    assert env.match_action(text) == expected


def test_env_speed_match_action_follows_a_replaced_vocabulary() -> None:
    env = ragen_envs.make("ragen/Bandit-v0").unwrapped
    seen = set()
    for seed in range(30):
        env.reset(seed=seed)
        a, b = env.action_names
        assert env.match_action(f" {a.upper()} ") == a and env.match_action(b.lower()) == b
        seen.add(env.action_names)
    assert len(seen) > 2


# --------------------------------------------------------------- Sokoban template
def _render_by_scan(layout, player, boxes, vocab) -> str:
    rows = []
    for r in range(layout.height):
        row = []
        for i in range(r * layout.width, (r + 1) * layout.width):
            if layout.walls[i]:
                row.append(vocab["wall"])
            elif i in boxes:
                row.append(vocab["box_on_target"] if i in layout.target_set else vocab["box"])
            elif i == player:
                row.append(vocab["player_on_target"] if i in layout.target_set else vocab["player"])
            else:
                row.append(vocab["target"] if i in layout.target_set else vocab["empty"])
        rows.append("".join(row))
    return "\n".join(rows)


@pytest.mark.parametrize("env_id", ["ragen/Sokoban-v0", "ragen/Sokoban-Large-v0", "ragen/Sokoban-Vocab-v0",
                                    "ragen/Sokoban-Levels-v0"])
def test_env_speed_sokoban_template_render_equals_cell_scan(env_id: str) -> None:
    env = ragen_envs.make(env_id).unwrapped
    rng = np.random.default_rng(0)
    for seed in range(15):
        env.reset(seed=seed)
        for _ in range(25):
            lay = env._puzzle.layout
            expected = _render_by_scan(lay, env._player, env._boxes, env._vocab)
            assert render_grid(lay, env._player, env._boxes, env._vocab) == expected
            if env.config["observation_format"] == "grid":
                assert env._observation() == expected
            _, _, te, tr, _ = env.step(env.sample_action(rng))
            if te or tr:
                break


# ------------------------------------------------------ Countdown fast checker
_EXPR = st.recursive(
    st.integers(0, 120).map(str),
    lambda inner: st.tuples(inner, st.sampled_from(["+", "-", "*", "/", " + ", " / "]), inner).map(
        lambda t: f"({t[0]}{t[1]}{t[2]})" if len(t[0]) % 3 == 0 else f"{t[0]}{t[1]}{t[2]}"),
    max_leaves=6,
)


@settings(max_examples=800, deadline=None)
@given(_EXPR, st.lists(st.integers(0, 120), min_size=1, max_size=6), st.integers(-50, 500))
def test_env_speed_countdown_fast_checker_equals_ast_path(text: str, numbers: list[int], target: int) -> None:
    fast = _check_fast(text, numbers, target)
    assert fast is not None, text  # the strict grammar covers every generated expression
    assert fast == _check_ast(text, numbers, target)


@settings(max_examples=800, deadline=None)
@given(st.lists(st.sampled_from(["1", "2", "0", "00", "07", "12", "+", "-", "*", "/", "(", ")", " ", "**", "//"]),
                min_size=1, max_size=14).map("".join).map(str.strip).filter(bool),
       st.lists(st.integers(0, 12), min_size=1, max_size=5))
def test_env_speed_countdown_fast_checker_defers_or_agrees(text: str, numbers: list[int]) -> None:
    fast = _check_fast(text, numbers, 24)
    if fast is not None:  # outside its grammar it defers to the ast path, which decides
        assert fast == _check_ast(text, numbers, 24)


# ----------------------------------------------------- info contract, every step
@pytest.mark.parametrize("env_id", [i for i in ALL_IDS if "DeepCoder" not in i])
def test_env_speed_info_contract_holds_on_every_step(env_id: str) -> None:
    """The contract no longer checked per step is checked here, on every step and type."""
    env = ragen_envs.make(env_id)
    key = ragen_envs.get_entry(env_id).env_key
    policy = make_random_policy(seed=7)
    for seed in range(20):
        result = run_episode(env, policy, seed=seed)
        for info in result.infos:
            ragen_envs.validate_info(key, info)
            assert type(info["action_is_valid"]) is bool and type(info["action_is_effective"]) is bool
            assert type(info["success"]) is bool and type(info["status"]) is str
            assert type(info["step"]) is int and type(info["episode_return"]) is float


# ------------------------------------------------------- Sudoku 4x4 uniqueness
def test_env_speed_sudoku_4x4_table_answers_as_the_search() -> None:
    """The 288-grid table gives the bounded search's answer on every removal question."""
    from ragen_envs.envs.sudoku.generator import has_unique_solution_without
    from ragen_envs.envs.sudoku.grid import geometry
    from ragen_envs.envs.sudoku.solver import random_solution, solve

    g = geometry(4)
    rng = np.random.default_rng(5)
    checked = 0
    for _ in range(150):
        grid = random_solution(4, rng)
        for cell in rng.permutation(16).tolist():
            allowed = [g.full] * 16
            allowed[cell] = g.full & ~(1 << grid[cell])
            trial = list(grid)
            trial[cell] = 0
            by_search = not solve(trial, limit=1, allowed=allowed)
            assert has_unique_solution_without(grid, cell, grid[cell]) == by_search
            checked += 1
            if by_search:
                grid[cell] = 0  # walk towards harder puzzles, as the generator does
    assert checked == 150 * 16
