"""The fast paths give exactly what the general paths give.

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
from ragen_envs.core import Transition, raw_bit_generator, raw_threshold, raw_uniform
from ragen_envs.envs.countdown.checker import _check_ast, _check_fast
from ragen_envs.envs.sokoban.render import render_grid
from ragen_envs.pcg64 import PCG64Stream, seed_words, seeded_stream

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
    assert raw_bit_generator(np.random.Generator(np.random.MT19937(0))) is None
    assert raw_threshold(float("nan")) is None


def test_env_speed_raw_bit_generator_is_the_coin_source() -> None:
    """Bandit holds the PCG64 itself: its random_raw() is the draw behind rng.random()."""
    a, b = np.random.default_rng(9), np.random.default_rng(9)
    bits, t = raw_bit_generator(b), raw_threshold(0.25)
    assert bits is b.bit_generator
    for _ in range(5000):
        assert (a.random() < 0.25) == (bits.random_raw() < t)
    assert a.bit_generator.state == b.bit_generator.state


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
    assert (
        second["arm"] != "tampered"
        and second["step"] == 1
        and second["status"] in {"success", "failure"}
    )
    assert list(second)[:6] == [
        "action_is_valid",
        "action_is_effective",
        "success",
        "status",
        "step",
        "episode_return",
    ]


def test_env_speed_reusable_transition_info_matches_literal() -> None:
    tr = Transition(reward=1, terminated=True, success=True, info={"arm": "x"})
    assert tr.template is None
    assert tr.reusable() is tr
    assert list(tr.template) == [
        "action_is_valid",
        "action_is_effective",
        "success",
        "status",
        "step",
        "episode_return",
        "arm",
    ]
    assert type(tr.reward) is float and type(tr.terminated) is bool


# ------------------------------------------------------------ action look-up table
@pytest.mark.parametrize(
    "text", ["Up", "up", "  UP\n", "uP ", "Upp", "", "Left", "RIGHT", "ß", "Down Up"]
)
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


@pytest.mark.parametrize(
    "env_id",
    [
        "ragen/Sokoban-v0",
        "ragen/Sokoban-Large-v0",
        "ragen/Sokoban-Vocab-v0",
        "ragen/Sokoban-Levels-v0",
    ],
)
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
        lambda t: f"({t[0]}{t[1]}{t[2]})" if len(t[0]) % 3 == 0 else f"{t[0]}{t[1]}{t[2]}"
    ),
    max_leaves=6,
)


@settings(max_examples=800, deadline=None)
@given(_EXPR, st.lists(st.integers(0, 120), min_size=1, max_size=6), st.integers(-50, 500))
def test_env_speed_countdown_fast_checker_equals_ast_path(
    text: str, numbers: list[int], target: int
) -> None:
    fast = _check_fast(text, numbers, target)
    assert fast is not None, text  # the strict grammar covers every generated expression
    assert fast == _check_ast(text, numbers, target)


@settings(max_examples=800, deadline=None)
@given(
    st.lists(
        st.sampled_from(
            ["1", "2", "0", "00", "07", "12", "+", "-", "*", "/", "(", ")", " ", "**", "//"]
        ),
        min_size=1,
        max_size=14,
    )
    .map("".join)
    .map(str.strip)
    .filter(bool),
    st.lists(st.integers(0, 12), min_size=1, max_size=5),
)
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
            assert (
                type(info["action_is_valid"]) is bool and type(info["action_is_effective"]) is bool
            )
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


# ------------------------------------------- Bandit step: fast path = base path
def _bandit_twin_results(config: dict, seed: int, actions: list) -> tuple[list, list]:
    """Step two envs of ``config`` through ``actions``: one by ``BanditEnv.step`` (fast
    path where it applies), one by ``TextEnv.step`` (the general path).  Each action
    gives its step result (or the exception's name), then the episode state."""
    from ragen_envs.core import TextEnv

    fast = ragen_envs.make("ragen/Bandit-v0", render_mode="ansi", **config).unwrapped
    base = ragen_envs.make("ragen/Bandit-v0", render_mode="ansi", **config).unwrapped
    out: list[list] = [[], []]
    for env, step, sink in (
        (fast, fast.step, out[0]),
        (base, lambda a: TextEnv.step(base, a), out[1]),
    ):
        env.reset(seed=seed)
        for a in actions:
            best = (env.oracle_actions() or env.action_names)[0]  # none left once the episode ended
            a = env.action_names[0] if a == "<first>" else best if a == "<best>" else a
            try:
                sink.append(step(a))
            except Exception as exc:  # noqa: BLE001 - the same refusal on both paths
                sink.append(type(exc).__name__)
            sink.append(
                [
                    env.status,
                    env.num_steps,
                    env.episode_return,
                    env.render(),
                    env.np_random.bit_generator.state["state"],
                ]
            )
    return out[0], out[1]


@pytest.mark.parametrize(
    "config",
    [
        {},
        {"answer_with": "label"},
        {"risky_prob": 0.9, "risky_reward": 0.2},
        {"split_by": "pairs", "max_steps": 1},
        {"split": "test", "max_steps": 2},
    ],
)
@pytest.mark.parametrize(
    "actions",
    [
        ["<best>"],
        ["<first>"],
        ["nope", "<best>"],
        ["nope", "nope", "nope"],
        [b"junk", "<first>", "<first>"],
        [7, "<best>"],
        ["<best>", "<best>"],
    ],
)
def test_env_speed_bandit_fast_step_equals_base_step(config: dict, actions: list) -> None:
    """Bandit step: BanditEnv.step's first-step shortcut returns exactly what
    TextEnv.step returns (observation, reward, flags, info with key order), leaves the
    same episode state and consumes the same draws, on every seed and spelling."""
    for seed in range(60):
        fast, base = _bandit_twin_results(config, seed, actions)
        assert fast == base
        for a, b in zip(fast, base):
            if isinstance(a, tuple):  # a step result: same key order and types too
                assert list(a[4]) == list(b[4]) and [type(x) for x in a] == [type(x) for x in b]
                assert type(a[1]) is float and type(a[2]) is bool and type(a[3]) is bool


def test_env_speed_bandit_fast_step_casefold_and_upper_case_spellings() -> None:
    """The table holds exact and casefolded names; other spellings take the general path
    and give the same result."""
    env = ragen_envs.make("ragen/Bandit-v0").unwrapped
    for seed in range(40):
        for spell in (str.lower, str.upper, lambda s: f"  {s}\n", str.casefold):
            env.reset(seed=seed)
            best = env.oracle_actions()[0]
            _, _, te, tr, info = env.step(spell(best))
            assert (
                te and not tr and info["arm"] == best and info["chose_best"] and info["step"] == 1
            )


def test_env_speed_reusable_transition_first_step_is_base_info() -> None:
    tr = Transition(reward=-0.0, terminated=True, success=False, info={"arm": "x"}).reusable()
    info, status, ret = tr.first_step
    assert (
        status.value == "failure" and ret == 0.0 and str(ret) == "0.0"
    )  # 0.0 + -0.0, as TextEnv.step sums
    assert info == {
        "action_is_valid": True,
        "action_is_effective": True,
        "success": False,
        "status": "failure",
        "step": 1,
        "episode_return": 0.0,
        "arm": "x",
    }
    assert Transition(reward=1.0).reusable().first_step is None  # not terminal: no first-step info


# ----------------------------------------------- Sudoku search: same visiting order
def test_env_speed_sudoku_search_visits_as_before() -> None:
    """Sudoku 4x4 reset: the table-driven search visits the nodes of the
    previous search in the same order: the same random grids, the same rng draws, the
    same solutions and the same budget overruns (digest recorded with the code before)."""
    import hashlib

    from ragen_envs.envs.sudoku.solver import SearchBudgetExceeded, random_solution, solve

    h = hashlib.sha256()
    for n, seeds in ((4, range(200)), (9, range(12))):
        for seed in seeds:
            rng = np.random.default_rng(seed)
            for budget in (None, 25):
                try:
                    out = random_solution(n, rng, budget=budget)
                except SearchBudgetExceeded:
                    out = "budget"
                h.update(repr(out).encode())
            h.update(repr(rng.random()).encode())  # where the searches left the generator
            grid = random_solution(n, rng)
            for cells in (
                rng.permutation(n * n)[: n * n // 2].tolist(),
                rng.permutation(n * n)[: n * n - 3].tolist(),
            ):
                puzzle = [0 if i in cells else v for i, v in enumerate(grid)]
                for limit, budget in ((1, None), (2, 400), (3, 60)):
                    try:
                        out = solve(puzzle, limit=limit, budget=budget)
                    except SearchBudgetExceeded:
                        out = "budget"
                    h.update(repr(out).encode())
    assert h.hexdigest() == "fd72ef101db525bd0a5622b200c59baa1e13fd92cf686bf058123c4607e8ae26"


def test_env_speed_sudoku_search_conflicting_givens_and_allowed_masks() -> None:
    from ragen_envs.envs.sudoku.solver import solve

    assert solve([1, 1] + [0] * 14) == []
    grid = [1, 2, 3, 4, 3, 4, 1, 2, 2, 1, 4, 3, 4, 3, 2, 1]
    puzzle = [0] * 4 + grid[4:]
    assert solve(puzzle) == [grid]
    allowed = [0b11110] * 16
    allowed[0] &= ~(1 << 1)  # cell 0 may not be 1: no solution left
    assert solve(puzzle, allowed=allowed) == []


def test_env_speed_sudoku_4x4_fill_tree_walk_equals_the_search() -> None:
    """Sudoku 4x4 reset: walking the precomputed 4x4 search tree gives the
    search's grid, leaves the generator where the search leaves it, and runs over the
    same node budget."""
    from ragen_envs.envs.sudoku.solver import (
        SearchBudgetExceeded,
        _fill_tree,
        random_solution,
        solve,
    )

    leaves = []

    def collect(node) -> None:
        if node is not None:
            if node[2] is not None:
                leaves.append(node[2])
            else:
                for child in node[1]:
                    collect(child)

    collect(_fill_tree(4))
    assert len(leaves) == len(set(leaves)) == 288  # every complete 4x4 grid, once
    for seed in range(300):
        for budget in (None, 16, 17, 18, 20, 25):
            a, b = np.random.default_rng(seed), np.random.default_rng(seed)
            walked = random_solution(4, a, budget=budget)
            try:
                searched = solve([0] * 16, limit=1, budget=budget, rng=b)[0]
            except SearchBudgetExceeded:
                searched = None
            assert walked == searched
            assert a.bit_generator.state == b.bit_generator.state


# ------------------------------------- Countdown: plain answers, results, observation
@settings(max_examples=600, deadline=None)
@given(
    st.lists(
        st.sampled_from(["1", "2", "0", "07", "12", "+", "-", "*", "/", "(", ")", " ", "  "]),
        min_size=0,
        max_size=14,
    ).map("".join),
    st.lists(st.integers(0, 12), min_size=1, max_size=5),
)
def test_env_speed_countdown_plain_answer_shortcut_equals_normalisation(
    text: str, numbers: list[int]
) -> None:
    """Countdown step: an answer of digits, + - * / ( ) and spaces skips the
    normalisation steps; a leading tab forces them (the tab becomes a space, then the
    text is stripped), and the result is the same, reasons included."""
    from ragen_envs.envs.countdown.checker import check_answer

    assert check_answer(text, numbers, 24) == check_answer("\t" + text, numbers, 24)


def test_env_speed_countdown_result_built_in_one_step_is_the_dataclass() -> None:
    import dataclasses
    from fractions import Fraction

    from ragen_envs.envs.countdown.checker import AnswerStatus, CheckResult, _valid_result

    for status in (AnswerStatus.CORRECT, AnswerStatus.WRONG):
        fast = _valid_result(status, Fraction(7, 2), "7 / 2")
        slow = CheckResult(status, value=Fraction(7, 2), expression="7 / 2")
        assert (
            type(fast) is CheckResult
            and fast == slow
            and hash(fast) == hash(slow)
            and repr(fast) == repr(slow)
        )
        assert vars(fast) == vars(slow) and dataclasses.astuple(fast) == dataclasses.astuple(slow)
        with pytest.raises(dataclasses.FrozenInstanceError):
            fast.value = Fraction(1)  # type: ignore[misc]


@pytest.mark.parametrize(
    "text", ["3 * 8", "(3 + 5) * 3", "48 / 2", "7 / 2", "50 - 26", "1 + 2 + 21"]
)
def test_env_speed_countdown_integer_target_test_equals_fraction_test(text: str) -> None:
    from ragen_envs.envs.countdown.checker import _check_fast

    numbers = [int(t) for t in text.replace("(", " ").replace(")", " ").split() if t.isdigit()]
    for target in (24, 3, 0, -24):
        exact = _check_fast(text, numbers, target)
        assert (
            exact
            == _check_fast(text, numbers, np.int64(target))
            == _check_fast(text, numbers, float(target))
        )


def test_env_speed_countdown_step_observation_is_the_rendered_one() -> None:
    """The step's observation (built in ``_step``) is what ``_observation()`` renders."""
    env = ragen_envs.make("ragen/Countdown-v0").unwrapped
    rng = np.random.default_rng(3)
    for seed in range(60):
        env.reset(seed=seed)
        action = env.oracle_actions()[0] if seed % 2 else env.sample_action(rng)
        obs, *_ = env.step(action)
        assert obs == env._observation()


# --------------------------------------------- slots: the episode state travels
@pytest.mark.parametrize("env_id", ["ragen/Bandit-v0", "ragen/Countdown-v0", "ragen/Sokoban-v0"])
def test_env_speed_slotted_episode_state_survives_copy_and_pickle(env_id: str) -> None:
    """TextEnv's and Bandit's hot fields are slots: copies and pickles still carry them."""
    import copy
    import pickle

    env = ragen_envs.make(env_id).unwrapped
    env.reset(seed=4)
    action = env.oracle_actions()[0]
    for twin in (copy.deepcopy(env), pickle.loads(pickle.dumps(env))):
        assert (twin.status, twin.num_steps, twin.episode_return) == (
            env.status,
            env.num_steps,
            env.episode_return,
        )
        a, b = twin.step(action), copy.deepcopy(env).step(action)
        assert a[1:] == b[1:] and a[0] == b[0]


# ------------------------------------------------- lazily seeded resets
def _numpy_draws(rng: np.random.Generator, kinds: list[int]) -> list[float | int]:
    return [
        rng.random()
        if n == 0
        else int(rng.integers(0, n, dtype=np.uint64 if n > 2**63 else np.int64))
        for n in kinds
    ]


def _stream_draws(stream: PCG64Stream, kinds: list[int]) -> list[float | int]:
    return [stream.random() if n == 0 else stream.integers(n) for n in kinds]


# 0 = random(); n = integers(n): 32-bit Lemire (incl. 2**32 - 1 and 2**32), 64-bit Lemire
# (sample_instance's base seed), the full 64-bit range, and the no-draw n = 1.
_KINDS = [12, 2, 0, 1, 3, 2**32 - 1, 2**32, 2**63 - 1, 2**33 + 5, 7, 0, 2**64]


@pytest.mark.parametrize(
    "seeds",
    [
        list(range(0, 600)),  # sequential: the block path
        [7, 3, 99, 1 << 31, 2**32 - 1, 12345, 0],  # out of sequence: one at a time
        [2**32, 2**40 + 3, 2**63 + 1, 2**90],  # above one entropy word: NumPy's SeedSequence
    ],
    ids=["sequential", "scattered", "wide"],
)
def test_env_speed_pcg64_stream_is_numpys_seeded_generator(seeds: list[int]) -> None:
    from gymnasium.utils import seeding

    for seed in seeds:
        rng, entropy = seeding.np_random(seed)
        stream = seeded_stream(seed)
        assert stream.bit_state() == rng.bit_generator.state, seed
        assert _stream_draws(stream, _KINDS) == _numpy_draws(rng, _KINDS), seed
        assert stream.bit_state() == rng.bit_generator.state
        assert stream.generator().random(4).tolist() == rng.random(4).tolist()
        assert entropy == seed


def test_env_speed_pcg64_block_boundary_and_negative_seed() -> None:
    from ragen_envs import pcg64

    top = 2**32 - 3
    for seed in range(top - 2, top + 6):  # a block cut short at the last one-word seed
        assert seed_words(seed) == tuple(
            np.random.SeedSequence(seed).generate_state(4, np.uint64).tolist()
        )
    for seed in range(pcg64.BLOCK - 3, pcg64.BLOCK * 2 + 3):  # across block ends
        assert seed_words(seed) == tuple(
            np.random.SeedSequence(seed).generate_state(4, np.uint64).tolist()
        )
    with pytest.raises(ValueError, match="non-negative"):
        seed_words(-1)


LAZY_IDS = [
    "ragen/Bandit-v0",
    "ragen/Bandit-Pairs-v0",
    "ragen/Bandit-PairsAB-v0",
    "ragen/FrozenLake-v0",
    "ragen/FrozenLake-8x8-v0",
    "ragen/FrozenLake-Slippery-v0",
    "ragen/Sudoku-v0",
    "ragen/Sudoku-4x4-Hard-v0",
]


def _play(env, seed: int, *, touch: bool) -> list:
    """Reset with ``seed`` and play up to 4 steps (oracle, else random), optionally reading
    ``np_random`` right after the reset; the record of everything observable."""
    obs, info = env.reset(seed=seed)
    record = [obs, info]
    if touch:
        record.append(env.np_random.bit_generator.state)
    rng = np.random.default_rng(seed)
    for _ in range(4):
        plan = env.oracle_actions() if seed % 2 else []
        action = plan[0] if plan else env.sample_action(rng)
        out = env.step(action)
        record.append(out)
        if out[2] or out[3]:
            break
    record.append(env.np_random.bit_generator.state)
    record.append(env.np_random_seed)
    return record


@pytest.mark.parametrize("env_id", LAZY_IDS)
def test_env_speed_lazy_seeding_is_gymnasium_seeding(env_id: str) -> None:
    """A lazily seeded env (pure-Python PCG64 stream, Generator built on first use) gives
    what the same env seeded by Gymnasium gives, step for step, whenever ``np_random``
    is first read."""
    fast = ragen_envs.make(env_id).unwrapped
    slow = ragen_envs.make(env_id).unwrapped
    assert fast.lazy_seeding
    slow.lazy_seeding = False  # Gymnasium's own np_random(seed), as before lazy seeding
    for seed in [*range(40), 977, 2**32 + 1]:
        touch = seed % 3 == 0
        assert _play(fast, seed, touch=touch) == _play(slow, seed, touch=touch), (env_id, seed)


def test_env_speed_lazy_seeding_after_seedless_reset_and_setter() -> None:
    fast = ragen_envs.make("ragen/Bandit-v0").unwrapped
    slow = ragen_envs.make("ragen/Bandit-v0").unwrapped
    slow.lazy_seeding = False
    fast.reset(seed=5)
    slow.reset(seed=5)
    for _ in range(3):  # reset() without a seed continues the seeded stream
        assert fast.reset() == slow.reset()
        assert fast.step(fast.oracle_actions()[0]) == slow.step(slow.oracle_actions()[0])
    fast.reset(seed=6)
    fast.np_random = np.random.default_rng(1)  # the setter replaces the stream
    assert fast._stream is None and fast.np_random_seed == -1
    assert fast.np_random.bit_generator.state == np.random.default_rng(1).bit_generator.state


def _bandit_state(env) -> dict:
    state = {k: v for k, v in vars(env).items() if k not in ("_stream", "_gen")}
    for name in ("_status", "_steps", "_return", "_live", "_ready", "_max_steps"):
        state[name] = getattr(env, name)
    state["_pending"] = env._pending
    state["_last"] = env._last
    state["rng"] = env.np_random.bit_generator.state
    return state


@pytest.mark.parametrize("env_id", ["ragen/Bandit-v0", "ragen/Bandit-PairsAB-v0"])
@pytest.mark.parametrize("split", ["train", "validation", "test"])
def test_env_speed_bandit_fast_reset_is_the_general_reset(env_id: str, split: str) -> None:
    """Bandit's direct reset (precomputed starts) sets exactly what TextEnv.reset with
    Bandit's hooks sets; ``split_by="pairs"`` and options take the general path."""
    from ragen_envs.core import TextEnv

    fast = ragen_envs.make(env_id, split=split).unwrapped
    slow = ragen_envs.make(env_id, split=split).unwrapped
    for seed in [*range(60), 4321]:
        got = fast.reset(seed=seed)
        want = TextEnv.reset(slow, seed=seed)
        assert got == want, seed
        assert _bandit_state(fast) == _bandit_state(slow), seed
        assert fast.step(fast.oracle_actions()[0]) == slow.step(slow.oracle_actions()[0])


def test_env_speed_bandit_reset_info_is_the_callers() -> None:
    env = ragen_envs.make("ragen/Bandit-v0").unwrapped
    _, info = env.reset(seed=3)
    arms = list(info["arms"])
    info["arms"].append("tampered")
    info["status"] = "tampered"
    _, again = env.reset(seed=3)
    assert again["arms"] == arms and again["status"] == "running"


def test_env_speed_frozenlake_flood_fill_is_the_search() -> None:
    """``has_path`` (bit-set flood fill) agrees with the breadth-first search on random
    maps of every shape from 1x2 to 9x9."""
    from ragen_envs.envs.frozenlake.maps import FrozenMap

    rng = np.random.default_rng(31)
    for _ in range(3000):
        nrow, ncol = (int(x) for x in rng.integers(1, 10, size=2))
        if nrow * ncol < 2:
            continue
        tiles = ["F" if u < rng.uniform(0.3, 0.95) else "H" for u in rng.random(nrow * ncol)]
        s, g = rng.choice(nrow * ncol, 2, replace=False)
        tiles[s], tiles[g] = "S", "G"
        fmap = FrozenMap(tuple("".join(tiles[r * ncol : (r + 1) * ncol]) for r in range(nrow)))
        assert fmap.has_path() == (fmap.shortest_path_length() is not None), fmap.rows


def test_env_speed_frozenlake_dynamics_built_on_first_use() -> None:
    from ragen_envs.envs.frozenlake.dynamics import build_dynamics

    env = ragen_envs.make("ragen/FrozenLake-Slippery-v0").unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.transitions  # noqa: B018
    env.reset(seed=2)
    assert env._dyn is None  # not built by the reset
    assert env.dynamics == build_dynamics(env.lake, env._success_rate)
    assert env.transitions is env.dynamics.transitions


def test_env_speed_pcg64_seed_words_from_threads() -> None:
    """The block cache is one object replaced whole: threads resetting at once, some in
    sequence and some not, always get NumPy's words for their own seed."""
    import threading

    errors: list[int] = []

    def work(offset: int) -> None:
        seeds = range(offset, offset + 1500) if offset % 2 else range(offset, 10**6, 997)
        for seed in list(seeds)[:1500]:
            want = tuple(np.random.SeedSequence(seed).generate_state(4, np.uint64).tolist())
            if seed_words(seed) != want:
                errors.append(seed)

    threads = [threading.Thread(target=work, args=(k * 5000 + k % 2,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
