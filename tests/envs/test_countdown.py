"""Countdown (spec: ``docs/envs/countdown.md``): the answer checker, the solver, generation,
JSONL data, rewards and observations.

The five cases the foundation issue names are in ``ISSUE_CASES``; every other checker
case is in ``CHECKER_CASES`` with the rule it exercises.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import ragen_envs
from ragen_envs.envs.countdown import AnswerStatus, check_answer, solve, split_key
from ragen_envs.envs.countdown.instances import generate_attempt, load_split, random_tree
from ragen_envs.envs.countdown.solver import render
from ragen_envs.seeding import SPLITS, instance_split

CORRECT, WRONG, INVALID = AnswerStatus.CORRECT, AnswerStatus.WRONG, AnswerStatus.INVALID
IDS = [e.id for e in ragen_envs.list_envs("Countdown")]

_HYP = dict(
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)

# ------------------------------------------------------------------ checker table

#: (numbers, target, answer, status, value or reason fragment).  Source: the
#: project's foundation spec, "Countdown ... These must hold".
ISSUE_CASES = [
    ([1, 81, 1, 1], 81, "81*1", INVALID, "exactly once"),
    ([1, 81, 1, 1], 81, "81*1*1*1", CORRECT, "81"),
    ([7, 2], 3, "7/2", WRONG, "7/2"),
    ([2, 3], 8, "2**3", INVALID, "**"),
    ([44, 19, 35], 60, "44-19+35", CORRECT, "60"),
]

CHECKER_CASES = [
    # numbers: each given number exactly once, all of them, nothing else
    ([3, 4], 8, "(3+5)", INVALID, "exactly once"),  # foreign number 5, 4 unused
    ([3, 4], 7, "3+4+4", INVALID, "exactly once"),  # a number used twice
    ([3, 3], 6, "3+3", CORRECT, "6"),  # repeats must all be used
    ([3, 3], 3, "3", INVALID, "exactly once"),
    ([8, 1], 81, "8 1", INVALID, "well-formed"),  # no digit concatenation
    ([81, 1, 1, 1], 81, "((((81))))*1*(1)*1", CORRECT, "81"),
    # operators: only binary + - * /
    ([3, 4], 1, "-3+4", INVALID, "unary"),
    ([3, 4], 7, "+3+4", INVALID, "unary"),
    ([3, 4], 7, "3--4", INVALID, "unary"),
    ([3, 2], 1, "3//2", INVALID, "//"),
    ([3, 2], 1, "3%2", INVALID, "%"),
    ([3, 2], 1, "3^2", INVALID, "character"),
    ([3, 5], 15, "3(5)", INVALID, "calls"),
    ([2, 3], 3, "1.5*2", INVALID, "decimals"),
    ([2, 3], 3, "3.0", INVALID, "decimals"),
    ([2, 3], 5, "__import__('os')", INVALID, "character"),
    ([2, 3], 5, "2+3 if 1 else 0", INVALID, "character"),
    ([2, 3], 5, "0x2+3", INVALID, "character"),
    ([2, 3], 5, "1e3", INVALID, "character"),
    ([2, 3], 5, "2_0+3", INVALID, "character"),
    ([2, 3], 5, "\u0662+\u0663", INVALID, "character"),  # Arabic-Indic digits
    ([2, 3], 5, "2+3;", INVALID, "character"),
    ([2, 3], 5, "[2+3]", INVALID, "character"),
    ([7, 0], 7, "007+0", INVALID, "well-formed"),  # leading zeros
    ([2, 3], 5, "", INVALID, "empty"),
    ([2, 3], 5, "   \n ", INVALID, "empty"),
    ([2, 3], 5, "(2+3", INVALID, "well-formed"),
    ([2, 3], 5, "2+", INVALID, "well-formed"),
    # division: exact, and never by zero
    ([3, 3, 5], 1, "5/(3-3)", INVALID, "divides by zero"),
    ([1, 3, 3], 1, "1/3*3", CORRECT, "1"),
    ([6, 4], 1, "6/4", WRONG, "3/2"),
    # RAGEN accepts |value - target| < 1e-5 (RAGEN-AI/RAGEN ragen/env/countdown/);
    # exact arithmetic does not.
    ([100000, 100001], 1, "100000/100001", WRONG, "100000/100001"),
    # aliases and whitespace
    ([3, 8, 2, 1], 24, "3 × 8 ÷ (2 − 1)", CORRECT, "24"),
    ([44, 19, 35], 60, " 44 -\t19\n+ 35 ", CORRECT, "60"),
    # '= target' suffix
    ([44, 19, 35], 60, "44-19+35 = 60", CORRECT, "60"),
    ([44, 19, 35], 60, "44-19+35=60", CORRECT, "60"),
    ([44, 19, 35], 60, "44-19+35 = 61", INVALID, "target 60"),
    ([7, 2], 3, "7/2 = 3", WRONG, "7/2"),  # claiming the target proves nothing
    ([44, 19, 35], 60, "44-19+35 == 60", INVALID, "at most one"),
    ([44, 19, 35], 60, "60 = 44-19+35", INVALID, "right-hand side"),
    ([44, 19, 35], 60, "= 60", INVALID, "empty"),
    ([44, 19, 35], 60, "44-19+35 =", INVALID, "right-hand side"),
    # wrong value with the right numbers: well-formed, format reward
    ([44, 19, 35], 60, "44+19+35", WRONG, "98"),
    ([44, 19, 35], 60, "19-44-35", WRONG, "-60"),
]


@pytest.mark.parametrize(
    ("numbers", "target", "answer", "status", "detail"), ISSUE_CASES + CHECKER_CASES
)
def test_checker_table(
    numbers: list[int], target: int, answer: str, status: AnswerStatus, detail: str
) -> None:
    r = check_answer(answer, numbers, target)
    assert r.status is status, r.reason
    if status is INVALID:
        assert r.value is None and r.expression is None
        assert detail in (r.reason or "")
    else:
        assert r.reason is None
        assert (
            r.value is not None
            and f"{r.value.numerator}"
            + (f"/{r.value.denominator}" if r.value.denominator != 1 else "")
            == detail
        )
        assert (
            check_answer(r.expression, numbers, target).status is status
        )  # canonical form round-trips


@pytest.mark.parametrize("answer", [None, 81, b"81*1*1*1", ["81"]])
def test_checker_rejects_non_strings(answer: object) -> None:
    assert check_answer(answer, [1, 81, 1, 1], 81).status is INVALID


def test_checker_length_bound_comes_first() -> None:
    ok = "81*1*1*1"
    assert check_answer(ok, [1, 81, 1, 1], 81, max_chars=len(ok)).status is CORRECT
    r = check_answer(ok, [1, 81, 1, 1], 81, max_chars=len(ok) - 1)
    assert r.status is INVALID and "too long" in (r.reason or "")
    huge = "1+" * 500_000 + "1"  # ~1 MB
    r = check_answer(huge, [1, 1], 2)
    assert r.status is INVALID and "too long" in (r.reason or "")


@pytest.mark.parametrize(
    "answer",
    [
        "(" * 10_000 + "81" + ")" * 10_000 + "*1*1*1",  # parser nesting limit
        "+".join(["1"] * 50_000),  # AST depth beyond the recursion limit
        "9" * 5_000 + "+1",  # integer literal beyond int-string limit
        "1" * 4_000 + "*1*1*81",  # a huge literal that parses: foreign number
        "((" * 3_000 + "1+1" + "))" * 3_000,
    ],
    ids=[
        "nested_parens_10k",
        "chain_50k",
        "literal_5k_digits",
        "literal_4k_digits",
        "nested_pairs",
    ],
)
def test_checker_survives_pathological_expressions_without_the_length_bound(answer: str) -> None:
    r = check_answer(answer, [1, 81, 1, 1], 81, max_chars=10**7)
    assert r.status is INVALID and r.reason


ALPHABET = "0123456789+-*/() =.×÷−%x_\n"


@settings(max_examples=400, **_HYP)
@given(
    text=st.one_of(st.text(max_size=80), st.text(alphabet=ALPHABET, max_size=60)),
    numbers=st.lists(st.integers(0, 20), min_size=1, max_size=4),
    target=st.integers(0, 100),
)
def test_checker_never_raises_on_arbitrary_text(text: str, numbers: list[int], target: int) -> None:
    r = check_answer(text, numbers, target)
    assert r.status in (CORRECT, WRONG, INVALID)
    if r.status is INVALID:
        assert isinstance(r.reason, str) and r.reason
    else:
        assert (r.value == target) == (r.status is CORRECT)


@settings(max_examples=300, **_HYP)
@given(
    numbers=st.lists(st.integers(0, 60), min_size=1, max_size=5),
    u=st.lists(st.floats(0, 1, exclude_max=True), min_size=12, max_size=12),
)
def test_checker_value_matches_the_tree_value(numbers: list[int], u: list[float]) -> None:
    """Any expression tree over the numbers, rendered, checks to the tree's exact value
    (the renderer's parentheses and the checker's evaluation agree)."""
    value, tree = random_tree(numbers, np.array(u[: 3 * (len(numbers) - 1)]))
    r = check_answer(render(tree), numbers, 7)
    if value is None:
        assert r.status is INVALID and "divides by zero" in (r.reason or "")
    else:
        assert r.value == value and r.status is (CORRECT if value == 7 else WRONG)


# -------------------------------------------------------------------------- solver


def _reachable(numbers: Sequence[int]) -> set[Fraction]:
    """Every value of every expression using each number once: an independent route
    (dynamic programming over sub-multisets by index mask) to check the solver."""
    n = len(numbers)
    table: dict[int, set[Fraction]] = {1 << i: {Fraction(x)} for i, x in enumerate(numbers)}
    for mask in range(1, 1 << n):
        if mask in table:
            continue
        vals: set[Fraction] = set()
        sub = (mask - 1) & mask
        while sub:
            rest = mask ^ sub
            if sub < rest:  # each unordered split once; both orders below
                for a in table[sub]:
                    for b in table[rest]:
                        vals.update((a + b, a - b, b - a, a * b))
                        if b:
                            vals.add(a / b)
                        if a:
                            vals.add(b / a)
            sub = (sub - 1) & mask
        table[mask] = vals
    return table[(1 << n) - 1]


def test_solver_agrees_with_an_independent_enumeration() -> None:
    rng = np.random.default_rng(20240501)
    checked = solvable = 0
    for n, trials in ((2, 40), (3, 40), (4, 6)):
        for _ in range(trials):
            numbers = [int(x) for x in rng.integers(0, 13, size=n)]
            reachable = _reachable(numbers)
            for target in range(0, 30):
                expr = solve(numbers, target)
                assert (expr is not None) == (Fraction(target) in reachable), (numbers, target)
                if expr is not None:
                    assert check_answer(expr, numbers, target).status is CORRECT, (
                        numbers,
                        target,
                        expr,
                    )
                    solvable += 1
                checked += 1
    assert 0.1 * checked < solvable < 0.9 * checked  # the comparison covered both outcomes


@pytest.mark.parametrize(
    ("numbers", "target"), [([1, 1, 1], 100), ([2], 3), ([], 0), ([5, 5, 5, 5, 5], 9999)]
)
def test_solver_returns_none_when_unsolvable(numbers: list[int], target: int) -> None:
    assert solve(numbers, target) is None


def test_solver_solves_the_issue_cases() -> None:
    for numbers, target, _, status, _ in ISSUE_CASES:
        if status is not CORRECT:
            continue
        expr = solve(numbers, target)
        assert expr is not None and check_answer(expr, numbers, target).status is CORRECT
    assert solve([7, 2], 3) is None  # 7/2 is not 3, and nothing else is either
    assert solve([2, 3], 8) is None  # only 2**3 would be


# ------------------------------------------------------------- generation, splits


@pytest.mark.parametrize("env_id", IDS)
@pytest.mark.parametrize("split", SPLITS)
def test_every_generated_instance_is_solvable_and_in_range(env_id: str, split: str) -> None:
    env = ragen_envs.make(env_id, split=split)
    base = env.unwrapped
    lo_n, hi_n = base.config["count_range"]
    for seed in range(200 if split == "train" else 60):
        obs, info = env.reset(seed=seed)
        numbers, target = info["numbers"], info["target"]
        assert lo_n <= len(numbers) <= hi_n
        assert all(1 <= x <= 100 for x in numbers) and 1 <= target <= 100
        assert instance_split(split_key(numbers)) == split
        assert obs == f"Target: {target} | Numbers: [{', '.join(map(str, numbers))}]"
        # the generator's witness and the solver's answer both pass the checker
        assert check_answer(base.witness, numbers, target).status is CORRECT
        (expr,) = base.oracle_actions()
        assert check_answer(expr, numbers, target).status is CORRECT


def test_splits_share_no_number_multiset() -> None:
    seen: dict[str, set[bytes]] = {}
    for split in SPLITS:
        env = ragen_envs.make("ragen/Countdown-v0", split=split)
        seen[split] = {split_key(env.reset(seed=s)[1]["numbers"]) for s in range(150)}
    for a, b in itertools.combinations(SPLITS, 2):
        assert not seen[a] & seen[b]


def test_generation_is_a_function_of_the_seed_only() -> None:
    a, b = ragen_envs.make("ragen/Countdown-v0"), ragen_envs.make("ragen/Countdown-v0")
    b.reset(seed=99)
    b.step("1")
    for seed in (0, 1, 12345, 2**31 - 1):
        assert a.reset(seed=seed) == b.reset(seed=seed)


def test_generation_respects_config_ranges() -> None:
    env = ragen_envs.make(
        "ragen/Countdown-v0", count_range=[5, 5], number_range=[1, 9], target_range=[200, 300]
    )
    for seed in range(20):
        _, info = env.reset(seed=seed)
        assert len(info["numbers"]) == 5 and all(1 <= x <= 9 for x in info["numbers"])
        assert 200 <= info["target"] <= 300
        assert env.unwrapped.optimal_return() == 1.0


def test_generate_attempt_fails_cleanly_on_division_by_zero_only_numbers() -> None:
    rng = np.random.default_rng(0)
    results = [
        generate_attempt(
            rng, count_range=[2, 2], number_range=[0, 0], target_range=[1, 5], split=None
        )
        for _ in range(20)
    ]
    assert results == [None] * 20  # 0 op 0 is never a target in [1, 5]


# ---------------------------------------------------------------- env behaviour


def _play(numbers: list[int], target: int, *answers: str, **config: object):
    env = ragen_envs.make("ragen/Countdown-v0", **config)
    obs, info = env.reset(seed=0, options={"nums": numbers, "target": target})
    out = [(obs, None, False, False, info)]
    for a in answers:
        out.append(env.step(a))
    return env, out


def test_issue_cases_through_the_env() -> None:
    env, steps = _play([1, 81, 1, 1], 81, "81*1", "81*1*1*1")
    obs0 = steps[0][0]
    assert obs0 == "Target: 81 | Numbers: [1, 81, 1, 1]"
    obs, reward, term, trunc, info = steps[1]
    assert (reward, term, trunc, info["action_is_valid"], info["status"]) == (
        -0.1,
        False,
        False,
        False,
        "running",
    )
    assert obs == obs0 and "exactly once" in info["invalid_reason"]
    obs, reward, term, trunc, info = steps[2]
    assert (reward, term, trunc, info["success"], info["status"]) == (
        1.0,
        True,
        False,
        True,
        "success",
    )
    assert obs == obs0 + "\nCorrect: 81 * 1 * 1 * 1 = 81."
    assert info["episode_return"] == pytest.approx(0.9)

    _, steps = _play([7, 2], 3, "7/2")
    obs, reward, term, trunc, info = steps[1]
    assert (reward, term, info["success"], info["status"], info["value"]) == (
        0.1,
        True,
        False,
        "failure",
        "7/2",
    )
    assert obs.endswith("\nWrong: 7 / 2 = 7/2, not 3.")

    _, steps = _play([2, 3], 8, "2**3")
    assert steps[1][1:3] == (-0.1, False) and not steps[1][4]["action_is_valid"]

    _, steps = _play([44, 19, 35], 60, "44-19+35")
    assert steps[1][1:3] == (1.0, True) and steps[1][4]["success"]


def test_invalid_answers_truncate_at_max_steps() -> None:
    env, steps = _play([3, 4], 7, "3+5", "-3+4", "3 4")
    assert [s[1] for s in steps[1:]] == [-0.1, -0.1, -0.1]
    assert [s[3] for s in steps[1:]] == [False, False, True]
    assert steps[-1][4]["status"] == "step_limit"


def test_rewards_come_from_the_config() -> None:
    _, steps = _play(
        [7, 2], 3, "7-2", success_reward=5.0, format_reward=0.0, invalid_action_reward=-1.0
    )
    assert steps[1][1] == 0.0
    _, steps = _play([7, 2], 5, "7 - 2 = 6", "7-2", success_reward=5.0, invalid_action_reward=-1.0)
    assert [s[1] for s in steps[1:]] == [-1.0, 5.0]


def test_max_answer_chars_is_configurable() -> None:
    _, steps = _play([44, 19, 35], 60, "44 - 19 + 35", max_answer_chars=8)
    assert not steps[1][4]["action_is_valid"] and "too long" in steps[1][4]["invalid_reason"]


def test_unsolvable_instance_from_options() -> None:
    env, _ = _play([1, 1, 1], 100)
    base = env.unwrapped
    assert base.optimal_return() == pytest.approx(0.1)
    (action,) = base.oracle_actions()
    assert check_answer(action, [1, 1, 1], 100).status is WRONG
    _, reward, term, _, info = env.step(action)
    assert (reward, term, info["status"]) == (0.1, True, "failure")


@pytest.mark.parametrize(
    "options",
    [
        {"nums": [1, 2]},
        {"nums": "12", "target": 3},
        {"nums": [True, 2], "target": 3},
        {"nums": [1] * 6, "target": 6},
        {"nums": [1, 2], "target": -3},
    ],
)
def test_bad_reset_options_raise(options: dict) -> None:
    with pytest.raises(ValueError, match="options"):
        ragen_envs.make("ragen/Countdown-v0").reset(seed=0, options=options)


def test_unknown_reset_options_are_ignored() -> None:
    env = ragen_envs.make("ragen/Countdown-v0")
    assert env.reset(seed=4, options={"options": 1}) == env.reset(seed=4)


def test_random_baseline_answers_use_every_number() -> None:
    env = ragen_envs.make("ragen/Countdown-v0")
    rng = np.random.default_rng(0)
    for seed in range(50):
        _, info = env.reset(seed=seed)
        action = env.unwrapped.sample_action(rng)
        assert sorted(
            int(t) for t in action.replace("(", " ").replace(")", " ").split() if t.isdigit()
        ) == sorted(info["numbers"])
        assert check_answer(action, info["numbers"], info["target"]).status in (CORRECT, WRONG)


def test_instruction_states_the_rules_and_rewards() -> None:
    env = ragen_envs.make("ragen/Countdown-v0", format_reward=0.25, max_steps=4)
    env.reset(seed=0)
    text = env.unwrapped.instruction
    for fragment in (
        "exactly once",
        "+ - * /",
        "7/2 is 3.5",
        "<answer>",
        "0.25",
        "at most 4 answers",
    ):
        assert fragment in text


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("count_range", [4, 3]),
        ("count_range", [2, 6]),
        ("number_range", [9, 1]),
        ("target_range", [0, 10]),
        ("max_steps", 1),
        ("max_answer_chars", 0),
    ],
)
def test_bad_config_names_the_field(field: str, value: object) -> None:
    with pytest.raises(ragen_envs.ConfigError) as exc:
        ragen_envs.make("ragen/Countdown-v0", **{field: value})
    assert exc.value.field.split("[")[0] == field


# ------------------------------------------------------------------------- JSONL


def _write_items(path: Path, items: list[dict], extra_lines: Sequence[str] = ()) -> Path:
    lines = [json.dumps(item) for item in items] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _sample_items(n: int) -> list[dict]:
    rng = np.random.default_rng(7)
    items = []
    while len(items) < n:
        inst = generate_attempt(
            rng, count_range=[3, 4], number_range=[1, 100], target_range=[1, 100], split=None
        )
        if inst is not None:
            items.append({"nums": list(inst.numbers), "target": inst.target, "extra": "ignored"})
    return items


def test_jsonl_items_are_split_by_hash_and_indexed_by_seed(tmp_path: Path) -> None:
    items = _sample_items(80)
    unsolvable = {"nums": [1, 1, 1], "target": 100}
    path = _write_items(
        tmp_path / "cd.jsonl", items + [items[0], unsolvable], extra_lines=["", "  "]
    )
    union = []
    for split in SPLITS:
        data = load_split(path, split)
        assert data.n_lines == 82
        assert all(instance_split(split_key(it.numbers)) == split for it in data.items)
        union += [(it.numbers, it.target) for it in data.items]
        env = ragen_envs.make("ragen/Countdown-v0", data_path=str(path), split=split)
        n = len(data.items)
        for seed in (0, 1, n - 1, n, 3 * n + 2):
            obs, info = env.reset(seed=seed)
            item = data.items[seed % n]
            assert info["data_index"] == seed % n and "generation_attempts" not in info
            assert (tuple(info["numbers"]), info["target"]) == (item.numbers, item.target)
            assert obs == f"Target: {item.target} | Numbers: [{', '.join(map(str, item.numbers))}]"
            (expr,) = env.unwrapped.oracle_actions()
            assert env.step(expr)[1] == 1.0
    # every distinct solvable item lands in exactly one split, in file order within it
    assert sorted(union) == sorted((tuple(it["nums"]), it["target"]) for it in items)
    dropped = [load_split(path, s) for s in SPLITS]
    assert sum(d.n_duplicates for d in dropped) == 1
    assert sum(d.n_unsolvable for d in dropped) == 1


def test_jsonl_issue_examples(tmp_path: Path) -> None:
    rows = [{"nums": [1, 81, 1, 1], "target": 81}, {"nums": [44, 19, 35], "target": 60}]
    path = _write_items(tmp_path / "two.jsonl", rows)
    for row in rows:
        split = instance_split(split_key(row["nums"]))
        env = ragen_envs.make("ragen/Countdown-v0", data_path=str(path), split=split)
        found = [env.reset(seed=s)[1] for s in range(2)]
        assert any(f["numbers"] == row["nums"] and f["target"] == row["target"] for f in found)


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        ("not json", "not valid JSON"),
        ("[1, 2, 3]", "JSON object"),
        ('{"nums": [1, 2]}', "'target'"),
        ('{"nums": [1, 2.5], "target": 3}', "nums item"),
        ('{"nums": [1, 2, 3, 4, 5, 6], "target": 3}', "'nums'"),
        ('{"nums": [1, 2], "target": -1}', "'target'"),
        ('{"nums": [true, 2], "target": 3}', "nums item"),
    ],
)
def test_jsonl_errors_name_the_field_and_line(tmp_path: Path, line: str, fragment: str) -> None:
    path = _write_items(tmp_path / "bad.jsonl", [{"nums": [1, 2], "target": 3}], extra_lines=[line])
    with pytest.raises(ragen_envs.ConfigError, match="data_path") as exc:
        ragen_envs.make("ragen/Countdown-v0", data_path=str(path))
    assert f"{path.resolve()}:2" in str(exc.value) and fragment in str(exc.value)


def test_jsonl_missing_file_and_empty_split(tmp_path: Path) -> None:
    with pytest.raises(ragen_envs.ConfigError, match="cannot read"):
        ragen_envs.make("ragen/Countdown-v0", data_path=str(tmp_path / "absent.jsonl"))
    row = {"nums": [44, 19, 35], "target": 60}
    path = _write_items(tmp_path / "one.jsonl", [row])
    other = next(s for s in SPLITS if s != instance_split(split_key(row["nums"])))
    with pytest.raises(ragen_envs.ConfigError, match="no usable item"):
        ragen_envs.make("ragen/Countdown-v0", data_path=str(path), split=other)
