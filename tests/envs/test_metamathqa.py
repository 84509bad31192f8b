"""MetaMathQA: answer extraction, equivalence, multi-attempt rewards, data, oracle."""

from __future__ import annotations

import json
import re
import sys
import time
from fractions import Fraction
from pathlib import Path

import pytest

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
from ragen_envs.data.loaders import MissingExtraError, load_source
from ragen_envs.envs.metamathqa import math_item_from_record
from ragen_envs.envs.metamathqa.equivalence import answers_equal, parse_number
from ragen_envs.envs.metamathqa.extract import extract_answer, last_boxed
from ragen_envs.envs.metamathqa.generator import TEMPLATES, format_answer, generate

# (text, expected answer, rule).  The first block is the table.
EXTRACTION_TABLE = [
    ("The total is 72 clips, altogether.", "72", "last_number"),
    ("\\boxed{8,000}", "8000", "boxed"),
    ("\\boxed{$9{,}500}", "9500", "boxed"),
    ("\\boxed{2^{10}}", "2^{10}", "boxed"),
    ("so the result is \\boxed{\\frac{1}{3}}", "\\frac{1}{3}", "boxed"),
    ("#### 2,125", "2125", "hashes"),
    ("Step 1 ...\nThe answer is: 18", "18", "answer_is"),
    ("Natalia sold 48 clips in April.\n#### 72", "72", "hashes"),
    # currency and trailing punctuation
    ("The answer is: $1,234.50.", "1234.50", "answer_is"),
    ("It costs $12.", "12", "last_number"),
    ("\\boxed{\\$9,500.}", "9500", "boxed"),
    ("€45", "45", "whole"),
    ("72.", "72", "whole"),
    ("The final answer is 3/4!", "3/4", "answer_is"),
    # the last box wins; nested braces
    ("\\boxed{1} or rather \\boxed{\\sqrt{\\frac{2}{3}}}", "\\sqrt{\\frac{2}{3}}", "boxed"),
    ("\\fbox{7}", "7", "boxed"),
    # normalisation
    ("x = 5", "5", "whole"),
    ("50\\%", "50", "whole"),
    ("\\boxed{90^\\circ}", "90", "boxed"),
    ("\\boxed{ \\dfrac{\\sqrt{2}}{2} }", "\\frac{\\sqrt{2}}{2}", "boxed"),
    ("\\boxed{\\text{5 apples}}", "5 apples", "boxed"),
    ("The answer is: -\\frac{3}{4}.", "-\\frac{3}{4}", "answer_is"),
    ("752.0", "752.0", "whole"),
    ("+7", "7", "whole"),
    ("1,2", "1,2", "whole"),  # not a thousands separator: kept as written
    # limits of the last-number rule (documented)
    ("The answer is 3 more than 5", "5", "last_number"),
]


@pytest.mark.parametrize(("text", "expected", "source"), EXTRACTION_TABLE)
def test_extraction_table(text: str, expected: str, source: str) -> None:
    got = extract_answer(text)
    assert got is not None
    assert (got.text, got.source) == (expected, source)


@pytest.mark.parametrize("text", ["", "   ", "no numbers here", "The answer is: unknown"])
def test_no_answer_is_none(text: str) -> None:
    assert extract_answer(text) is None


def test_unclosed_box_falls_back() -> None:
    assert last_boxed("\\boxed{12") is None
    assert extract_answer("\\boxed{12").text == "12"


EQUIVALENT = [
    ("752", "752.0"),
    ("1/3", "\\frac{1}{3}"),
    ("0.5", "\\frac{1}{2}"),
    ("8000", "8,000"),
    ("-\\frac{3}{4}", "-0.75"),
    ("2^{10}", "1024"),
    ("x+1", "1+x"),
    ("\\frac{\\sqrt{2}}{2}", "\\frac{1}{\\sqrt{2}}"),
    ("\\sqrt{8}", "2\\sqrt{2}"),
    ("2\\pi", "\\pi*2"),
]
DIFFERENT = [
    ("0.333", "1/3"),
    ("3", "4"),
    ("x+1", "x-1"),
    ("72", "720"),
    ("\\frac{1}{3}", "\\frac{1}{4}"),
]


@pytest.mark.parametrize("checker", ["math_verify", "sympy"])
@pytest.mark.parametrize(("a", "b"), EQUIVALENT)
def test_equivalent_answers(checker: str, a: str, b: str) -> None:
    assert answers_equal(a, b, checker=checker) and answers_equal(b, a, checker=checker)


@pytest.mark.parametrize("checker", ["math_verify", "sympy", "numeric"])
@pytest.mark.parametrize(("a", "b"), DIFFERENT)
def test_different_answers(checker: str, a: str, b: str) -> None:
    assert not answers_equal(a, b, checker=checker)


def test_numeric_checker_needs_no_symbolic_package() -> None:
    assert answers_equal("752", "752.0", checker="numeric")
    assert answers_equal("1/3", "\\frac{1}{3}", checker="numeric")
    assert not answers_equal("2^{10}", "1024", checker="numeric")


def test_parse_number_is_exact() -> None:
    assert parse_number("0.1") == Fraction(1, 10)
    assert parse_number("-\\frac{6}{8}") == Fraction(-3, 4)
    assert parse_number("1/0") is None and parse_number("x") is None


@pytest.mark.parametrize("checker", ["math_verify", "sympy"])
def test_costly_answers_do_not_stall(checker: str) -> None:
    t = time.perf_counter()
    assert not answers_equal("2^{2^{2^{100}}}", "5", checker=checker)
    assert not answers_equal("10^{100000}", "1", checker=checker)
    assert not answers_equal("(" * 300 + "1" + ")" * 300, "2", checker=checker)
    assert time.perf_counter() - t < 5  # generous bound: without the guard this never returns


def test_missing_math_verify_names_the_extra_when_needed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "math_verify", None)
    env = ragen_envs.make("ragen/MetaMathQA-v0")
    env.reset(seed=0)
    # Exact text/number comparison needs no extra (the oracle works on a bare install) ...
    assert env.step(env.unwrapped.item.answer)[4]["success"]
    env.reset(seed=0)
    # ... a symbolic answer needs the checker, and its absence is a clear error.
    with pytest.raises(
        MissingExtraError,
        match=re.escape("pip install 'ragen-envs[math]' (or 'ragen[math]' for the full project"),
    ):
        env.step("\\boxed{x + 1}")
    env = ragen_envs.make("ragen/MetaMathQA-v0", equivalence="numeric")  # stdlib-only checker
    env.reset(seed=0)
    assert not env.step("\\boxed{x + 1}")[4]["correct"]


# -------------------------------------------------------------- the env
def _episode(env_id: str = "ragen/MetaMathQA-v0", **config):
    env = ragen_envs.make(env_id, **config)
    obs, info = env.reset(seed=0)
    return env, env.unwrapped, obs, info


@pytest.mark.parametrize("k", [0, 1, 2])
def test_attempt_k_earns_half_to_the_k(k: int) -> None:
    # RAGEN: reward 1/2^k for the first correct answer at attempt k
    # (RAGEN-AI/RAGEN ragen/env/metamathqa/).
    env, base, obs, _ = _episode(max_attempts=3, max_steps=5)
    gold = base.item.answer
    total = 0.0
    for attempt in range(k):
        obs, r, term, trunc, info = env.step("\\boxed{-123456789}")
        assert (r, term, info["correct"], info["attempt"]) == (0.0, False, False, attempt)
        assert "incorrect" in obs and f"{2 - attempt} attempt" in obs
        assert obs.startswith(base.item.question)
        total += r
    obs, r, term, trunc, info = env.step(f"The answer is: {gold}")
    assert term and info["success"] and info["status"] == "success"
    assert r == pytest.approx(0.5**k) and info["episode_return"] == pytest.approx(0.5**k)


def test_all_attempts_wrong_ends_in_failure() -> None:
    env, *_ = _episode(max_attempts=2, max_steps=4)
    env.step("-1")
    obs, r, term, trunc, info = env.step("-2")
    assert term and not trunc and info["status"] == "failure" and info["attempts_left"] == 0
    assert "No attempts are left" in obs


def test_attempt_decay_is_configurable() -> None:
    env, base, *_ = _episode(max_attempts=2, max_steps=3, attempt_decay=0.25)
    env.step("-1")
    assert env.step(base.item.answer)[1] == pytest.approx(0.25)


@pytest.mark.parametrize("answer", ["((((", "\\boxed{}", "7" * 10001])
def test_answers_without_content_or_too_long_are_invalid(answer: str) -> None:
    env, base, obs0, _ = _episode()
    obs, r, term, trunc, info = env.step(answer)
    assert not info["action_is_valid"] and obs == obs0 and not term


def test_answer_without_any_number_is_invalid() -> None:
    env, base, obs0, _ = _episode(max_attempts=1, max_steps=2)
    obs, r, term, trunc, info = env.step("I do not know.")
    assert not info["action_is_valid"] and r == -0.1 and not term and not trunc
    assert obs == obs0  # state unchanged
    obs, r, term, trunc, info = env.step("still nothing")
    assert trunc and info["status"] == "step_limit"


def test_only_the_answer_text_is_read_and_equivalents_are_accepted() -> None:
    env, base, *_ = _episode("ragen/MetaMathQA-GSM8K-v0")
    gold = base.item.answer
    value = parse_number(gold)
    assert value is not None
    spelled = (
        f"So the total is \\boxed{{{format_answer(value, thousands=True).replace(',', '{,}')}}}."
    )
    _, r, term, _, info = env.step(spelled)
    assert info["correct"] and r == 1.0 and info["answer_source"] == "boxed"


def test_max_steps_must_cover_the_attempts() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="max_steps"):
        ragen_envs.make("ragen/MetaMathQA-v0", max_attempts=4, max_steps=3)


def test_instruction_states_the_rules() -> None:
    text = ragen_envs.make("ragen/MetaMathQA-MultiAttempt-v0").unwrapped.instruction
    assert "3 attempts" in text and "0.5^k" in text and "\\boxed" in text and "<answer>" in text


# ---------------------------------------------------------------- data
@pytest.mark.parametrize(
    "source", ["bundled:math-templates-metamathqa", "bundled:math-templates-gsm8k"]
)
def test_oracle_answers_every_bundled_item_in_every_split(source: str) -> None:
    # The gold answer is read back through the same extraction as the agent's answer.
    for split in ("train", "validation", "test"):
        env = ragen_envs.make("ragen/MetaMathQA-v0", data_source=source, split=split)
        n = len(env.unwrapped.split_items())
        assert n > 0
        for i in range(n):
            result = run_episode(env, oracle_policy, seed=i)
            assert result.success and result.episode_return == 1.0


def test_bundled_gold_answers_match_the_generator() -> None:
    # Independent route: the exact answers computed by the templates, re-spelled.
    problems = generate(420, seed=1)
    recs = load_source("bundled:math-templates-metamathqa")
    for p, rec in zip(problems, recs):
        item = math_item_from_record(rec)
        assert item is not None and answers_equal(
            item.answer, format_answer(p.answer), checker="numeric"
        )
        if p.answer.denominator == 1:
            assert parse_number(item.answer) == p.answer
    gsm = load_source("bundled:math-templates-gsm8k")
    assert any("#### " in r["answer"] and "," in r["answer"].split("####")[1] for r in gsm)
    for p, rec in zip(generate(315, seed=2), gsm):
        item = math_item_from_record(rec)
        assert item is not None and parse_number(item.answer) == p.answer


def test_generator_is_deterministic_and_covers_every_template() -> None:
    a, b = generate(60, seed=5), generate(60, seed=5)
    assert a == b
    assert {p.template for p in generate(len(TEMPLATES) * 2, seed=0)} >= {
        "bags",
        "pie",
        "together",
        "factory",
    }
    assert len({p.question for p in generate(300, seed=3)}) == 300


def test_record_formats(tmp_path: Path) -> None:
    mm = {"query": "Q?", "response": "work\nThe answer is: 8,000", "original_question": "orig"}
    gsm = {"question": "Q2?", "answer": "calc\n#### 2,125"}
    qa = {"question": "Q3?", "answer": "$9{,}500"}
    assert (
        math_item_from_record(mm).answer == "8000" and math_item_from_record(mm).key_text == "orig"
    )
    assert math_item_from_record(gsm).answer == "2125"
    assert math_item_from_record(qa).answer == "9500"
    path = tmp_path / "mixed.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in (mm, gsm, qa)) + "\n")
    env = ragen_envs.make("ragen/MetaMathQA-v0", data_source=str(path), split="train").unwrapped
    assert all(item.answer in {"8000", "2125", "9500"} for item in env.split_table()["train"])


def test_rephrasings_of_one_question_share_a_split() -> None:
    # MetaMathQA augments each original question several times; the split follows the original.
    rows = [
        {
            "query": f"Rephrasing {i} of a question",
            "response": "The answer is: 3",
            "original_question": "The question",
        }
        for i in range(20)
    ]
    keys = {
        ragen_envs.envs.metamathqa.env.canonical_key(math_item_from_record(r).key_text)
        for r in rows
    }
    assert len(keys) == 1
