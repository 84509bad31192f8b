"""DeepCoder: code extraction, output comparison, data formats, sandboxed judging, env rules."""

from __future__ import annotations

import base64
import json
import pickle
import time
import zlib
from concurrent.futures import ThreadPoolExecutor

import pytest

import ragen_envs
from ragen_envs.baselines import oracle_policy, run_episode
from ragen_envs.data.loaders import load_source
from ragen_envs.envs.deepcoder.harness import count_asserts, py_literal
from ragen_envs.envs.deepcoder.judge import (
    extract_code,
    judge,
    outputs_match,
    reference_passes,
    values_match,
)
from ragen_envs.envs.deepcoder.judge import tests_count as count_tests
from ragen_envs.envs.deepcoder.problems import (
    FORMATS,
    CallTest,
    CheckTest,
    ProblemFormatError,
    StdioTest,
    decode_lcb_tests,
    detect_format,
    problem_from_record,
)
from ragen_envs.sandbox import SandboxConfig

FAST = SandboxConfig(cpu_time_s=2, wall_time_s=6, memory_mb=512)


# ---------------------------------------------------------- extraction
@pytest.mark.parametrize(
    ("answer", "code"),
    [
        ("print(1)", "print(1)"),
        ("```python\nprint(2)\n```", "print(2)"),
        ("Here:\n```py\nx = 1\n```\nand better:\n```python\nprint(3)\n```\nDone.", "print(3)"),
        ("```\nprint(4)\n```", "print(4)"),
        (
            "```python\nprint(5)\n```\n```text\noutput: 5\n```",
            "print(5)",
        ),  # prose block after the code
        ("```cpp\nint main(){}\n```", "int main(){}"),  # only another language: used as is
        ("```python\nprint(6)", "print(6)"),  # unclosed fence (cut off)
    ],
)
def test_extract_code(answer: str, code: str) -> None:
    assert extract_code(answer) == code


@pytest.mark.parametrize("answer", ["", "   \n", "```python\n```"])
def test_extract_code_empty(answer: str) -> None:
    assert extract_code(answer) is None


# ---------------------------------------------------------- comparison
@pytest.mark.parametrize(
    ("got", "expected", "ok"),
    [
        ("3\n6\n", "3 6", True),  # whitespace-insensitive
        ("3.0000001", "3", False),  # an expected integer takes no tolerance
        ("3.0", "3", True),  # ... but the same integer written as a float is fine
        ("3", "3.0", True),
        ("3", "4", False),
        ("10", "010", False),  # two integer literals: exact
        ("1000000.5", "1000000", False),  # expected integer: exact
        ("1000000.5", "1000000.0", True),  # relative error 5e-7
        ("1000001", "1000000.0", True),  # relative error exactly 1e-6: accepted (<=)
        ("1000002", "1000000.0", False),  # relative error 2e-6
        ("0.1234567", "0.1234560", True),  # absolute error 7e-7
        ("0.124", "0.123", False),
        ("YES", "yes", False),
        ("nan", "nan", True),  # equal tokens
        ("inf", "1e308", False),
        ("1 2", "1 2 3", False),
    ],
)
def test_outputs_match(got: str, expected: str, ok: bool) -> None:
    assert outputs_match(got, expected) is ok


@pytest.mark.parametrize(
    ("got", "expected", "ok"),
    [
        ([1, 2], [1, 2], True),
        ((1, 2), [1, 2], True),
        (0.1 + 0.2, 0.3, True),
        (1, 1.0000001, True),
        (True, 1, False),
        ([1, [2.0000001]], [1, [2.0]], True),
        ([1, [2.0000001]], [1, [2]], False),  # an expected integer takes no tolerance
        ({"a": 1}, {"a": 1.0}, True),
        ("1", 1, False),
    ],
)
def test_values_match(got: object, expected: object, ok: bool) -> None:
    assert values_match(got, expected) is ok


def test_py_literal_embeds_json_values() -> None:
    assert eval(py_literal([1, "a", None, True, {"k": [1.5]}, float("inf")])) == [
        1,
        "a",
        None,
        True,
        {"k": [1.5]},
        float("inf"),
    ]  # noqa: S307


# ---------------------------------------------------------- formats
APPS_STDIN = {
    "problem_id": 7,
    "question": "Add two numbers.",
    "solutions": json.dumps(["a,b=map(int,input().split())\nprint(a+b)"]),
    "input_output": json.dumps({"inputs": ["1 2\n", ["3 4"]], "outputs": ["3\n", ["7"]]}),
    "starter_code": "",
    "difficulty": "introductory",
    "url": "u",
}
APPS_CALL = {
    "problem_id": 8,
    "question": "Double it.",
    "solutions": json.dumps(["def double(x):\n    return 2 * x"]),
    "input_output": json.dumps({"fn_name": "double", "inputs": [[2], [5]], "outputs": [[4], [10]]}),
    "starter_code": "def double(x):",
    "difficulty": "introductory",
    "url": "u",
}
TACO = {
    **APPS_STDIN,
    "name": "sum",
    "source": "codeforces",
    "raw_tags": "[]",
    "skill_types": "[]",
    "tags": "[]",
}
TACO.pop("problem_id")
LCB_TESTS = [{"input": "[1, 2, 3]\n2", "output": "[2, 4, 6]", "testtype": "functional"}]
LCB = {
    "question_id": "q1",
    "question_title": "Scale",
    "question_content": "Multiply each element by k.",
    "platform": "leetcode",
    "starter_code": "class Solution:\n    def scale(self, nums, k):\n        ",
    "public_test_cases": json.dumps(LCB_TESTS),
    "private_test_cases": base64.b64encode(
        zlib.compress(
            pickle.dumps(
                json.dumps([{"input": "[0]\n5", "output": "[0]", "testtype": "functional"}])
            )
        )
    ).decode(),
    "metadata": json.dumps({"func_name": "scale"}),
}
LCB_STDIN = {
    "question_id": "q2",
    "question_title": "Echo",
    "question_content": "Print the input.",
    "public_test_cases": json.dumps([{"input": "hi\n", "output": "hi\n", "testtype": "stdin"}]),
    "private_test_cases": "",
    "metadata": "{}",
    "starter_code": "",
}
DC_TACO = {"problem": "Add.", "tests": json.dumps({"inputs": ["1 2\n"], "outputs": ["3\n"]})}
DC_LCB = {
    "problem": "Scale.",
    "tests": json.dumps([{**t, "metadata": {"func_name": "scale"}} for t in LCB_TESTS]),
    "starter_code": LCB["starter_code"],
}
DC_PRIME = {
    "problem": "Add.",
    "tests": json.dumps([{"input": "1 2\n", "output": "3\n", "type": "stdin_stdout"}]),
}
DC_PRIME_CALL = {
    "problem": "Double.",
    "tests": json.dumps(
        [{"input": [3], "output": [6], "type": "function_call", "fn_name": "double"}]
    ),
}
DC_CF = {"problem": "Add.", "tests": json.dumps([{"input": "1 2\n", "output": "3\n"}])}

ADD = "a, b = map(int, input().split())\nprint(a + b)\n"
SCALE = "class Solution:\n    def scale(self, nums, k):\n        return [x * k for x in nums]\n"
DOUBLE = "def double(x):\n    return 2 * x\n"


@pytest.mark.parametrize(
    ("record", "fmt", "kind", "good", "bad"),
    [
        (APPS_STDIN, "apps", StdioTest, ADD, "print(0)"),
        (APPS_CALL, "apps", CallTest, DOUBLE, "def double(x):\n    return x"),
        (TACO, "taco", StdioTest, ADD, "print(0)"),
        (
            LCB,
            "livecodebench",
            CallTest,
            SCALE,
            "class Solution:\n    def scale(self, nums, k):\n        return nums",
        ),
        (LCB_STDIN, "livecodebench", StdioTest, "print(input())", "print('no')"),
        (DC_TACO, "deepcoder", StdioTest, ADD, "print(0)"),
        (DC_LCB, "deepcoder", CallTest, SCALE, "def scale(nums, k):\n    return []"),
        (DC_PRIME, "deepcoder", StdioTest, ADD, "print(0)"),
        (DC_PRIME_CALL, "deepcoder", CallTest, DOUBLE, "def double(x):\n    return 0"),
        (DC_CF, "deepcoder", StdioTest, ADD, "print(0)"),
    ],
)
def test_format_readers_and_judging(
    record: dict, fmt: str, kind: type, good: str, bad: str
) -> None:
    assert detect_format(record) == fmt
    problem = problem_from_record(record)
    assert problem.tests and all(isinstance(t, kind) for t in problem.tests)
    assert judge(good, problem, sandbox=FAST).all_passed
    report = judge(bad, problem, sandbox=FAST)
    assert not report.all_passed and report.first_failure is not None


def test_format_details() -> None:
    apps = problem_from_record(APPS_STDIN)
    assert [t.input for t in apps.tests] == ["1 2\n", "3 4"] and apps.id == "apps/7"
    assert apps.reference_solution and judge(apps.reference_solution, apps, sandbox=FAST).all_passed
    call = problem_from_record(APPS_CALL)
    assert call.tests[0] == CallTest("double", (2,), [4], accept_wrapped=True)
    lcb = problem_from_record(LCB)
    assert len(lcb.tests) == 2 and lcb.tests[1].args == (
        [0],
        5,
    )  # public + compressed private tests
    assert "Use this starter code" in lcb.prompt and lcb.key_text == LCB["question_content"]


def test_lcb_decoder_refuses_pickled_objects() -> None:
    class Evil:
        def __reduce__(self):
            return (print, ("pwned",))

    payload = base64.b64encode(zlib.compress(pickle.dumps(Evil()))).decode()
    with pytest.raises(ProblemFormatError, match="refusing to load global"):
        decode_lcb_tests(payload)


def test_malformed_records_are_format_errors() -> None:
    with pytest.raises(ProblemFormatError):
        detect_format({"foo": 1})
    with pytest.raises(ProblemFormatError, match="outputs"):
        problem_from_record(
            {**APPS_STDIN, "input_output": json.dumps({"inputs": ["1"], "outputs": []})}
        )
    with pytest.raises(ProblemFormatError, match="no test"):
        problem_from_record(
            {**APPS_STDIN, "input_output": json.dumps({"inputs": [], "outputs": []})}
        )


# ---------------------------------------------------------- judging
def test_feedback_shows_input_expected_and_got_truncated() -> None:
    problem = problem_from_record(
        {"id": "t", "prompt": "p", "tests": [{"input": "x" * 1000 + "\n", "output": "1\n"}]}
    )
    report = judge("print(2)", problem, sandbox=FAST, feedback_chars=50)
    fb = report.first_failure.feedback
    assert "Input:" in fb and "Expected output:\n1" in fb and "Your output:\n2" in fb
    assert "[951 more characters]" in fb


def test_runtime_error_and_timeout_feedback() -> None:
    problem = problem_from_record(
        {"id": "t", "prompt": "p", "tests": [{"input": "", "output": "1"}]}
    )
    rep = judge("raise ValueError('boom')", problem, sandbox=FAST)
    assert (
        rep.first_failure.status == "runtime_error"
        and "ValueError: boom" in rep.first_failure.feedback
    )
    rep = judge("while True:\n    pass", problem, sandbox=FAST.with_(cpu_time_s=1, wall_time_s=3))
    assert (
        rep.first_failure.status == "timeout"
        and "time limit exceeded" in rep.first_failure.feedback
    )
    rep = judge("def f(:\n", problem, sandbox=FAST)
    assert rep.syntax_error and rep.first_failure.status == "syntax_error"


def test_check_tests_count_each_assert_and_continue_after_failures() -> None:
    test = "def check(candidate):\n    assert candidate(1) == 2\n    assert candidate(2) == 4\n    assert True\n    for i in range(3):\n        assert candidate(i) == 2 * i\n"
    assert count_asserts(test) == 3  # `assert True` is not a test
    problem = problem_from_record(
        {
            "task_id": "T/0",
            "prompt": "def f(x):\n",
            "entry_point": "f",
            "canonical_solution": "    return 2 * x\n",
            "test": test,
        }
    )
    assert judge(problem.reference_solution, problem, sandbox=FAST).passed == 3
    rep = judge("def f(x):\n    return 2 if x == 1 else 0\n", problem, sandbox=FAST)
    assert [o.passed for o in rep.outcomes] == [True, False, False]
    assert "(got 0)" in rep.first_failure.feedback
    # An exit from the candidate inside an assert is a failure, not a pass.
    rep = judge("import sys\ndef f(x):\n    sys.exit(0)\n", problem, sandbox=FAST)
    assert rep.passed == 0


def test_candidate_output_does_not_confuse_the_driver() -> None:
    problem = problem_from_record(APPS_CALL)
    assert judge(
        "def double(x):\n    print('debug', x)\n    return 2 * x\n", problem, sandbox=FAST
    ).all_passed


def test_stop_on_first_failure_and_max_tests() -> None:
    problem = problem_from_record(load_source("bundled:code-stdio-ours")[0])
    rep = judge("print(0)", problem, sandbox=FAST, stop_on_first_failure=True)
    assert rep.total == len(problem.tests) and {o.status for o in rep.outcomes[1:]} == {"not_run"}
    assert judge(problem.reference_solution, problem, sandbox=FAST, max_tests=2).total == 2


def test_every_humaneval_canonical_solution_passes_and_a_wrong_one_fails() -> None:
    problems = [problem_from_record(r) for r in load_source("bundled:humaneval")]
    assert len(problems) == 164
    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=2) as pool:  # the build machine has 2 cores
        reports = list(pool.map(lambda p: reference_passes(p, sandbox=FAST), problems))
    elapsed = time.perf_counter() - t0
    failed = [p.id for p, r in zip(problems, reports) if not r.all_passed]
    assert not failed, failed
    print(f"\n164 HumanEval canonical solutions in the sandbox: {elapsed:.1f} s")
    wrong = judge(
        problems[0].prompt.split("```python\n")[1].split("```")[0] + "    return True\n",
        problems[0],
        sandbox=FAST,
    )
    assert not wrong.all_passed and 0 < wrong.passed < wrong.total


def test_every_reference_program_of_ours_passes_its_independent_tests() -> None:
    problems = [problem_from_record(r) for r in load_source("bundled:code-stdio-ours")]
    assert len(problems) >= 20
    with ThreadPoolExecutor(max_workers=2) as pool:
        reports = list(pool.map(lambda p: reference_passes(p, sandbox=FAST), problems))
    assert all(r.all_passed and r.total >= 6 for r in reports), [
        p.id for p, r in zip(problems, reports) if not r.all_passed
    ]


# ---------------------------------------------------------- the env
def test_default_split_is_train_and_splits_are_disjoint() -> None:
    env = ragen_envs.make("ragen/DeepCoder-v0").unwrapped
    assert env.config["split"] == "train"
    sizes = env.split_table().sizes
    assert all(sizes[s] > 0 for s in ("train", "validation", "test"))


@pytest.mark.parametrize("split", ["validation", "test"])
def test_oracle_passes_every_problem_of_the_held_out_splits(split: str) -> None:
    env = ragen_envs.make("ragen/DeepCoder-v0", split=split)
    for i in range(len(env.unwrapped.split_items())):
        result = run_episode(env, oracle_policy, seed=i)
        assert result.success and result.episode_return == pytest.approx(1.0), (
            result.infos[-1],
            result.observations[-1][-800:],
        )


def test_multi_attempt_feedback_and_rewards() -> None:
    env = ragen_envs.make(
        "ragen/DeepCoder-v0", max_attempts=3, max_steps=6, data_source="bundled:code-stdio-ours"
    )
    obs0, _ = env.reset(seed=0)
    base = env.unwrapped
    obs, r, term, trunc, info = env.step("print(0)")
    assert (
        not term and info["attempts_left"] == 2 and info["first_failure_status"] == "wrong_answer"
    )
    assert (
        obs.startswith(obs0)
        and "First failing test" in obs
        and "Expected output" in obs
        and "Your output" in obs
    )
    assert r == pytest.approx(info["pass_rate"])
    first_value = r
    # A program that does not parse is an invalid action: penalty, no attempt used.
    obs_before = obs
    obs, r, term, trunc, info = env.step("print(")
    assert not info["action_is_valid"] and r == -0.1 and "does not parse" in info["invalid_reason"]
    assert obs == obs_before and not term
    # An attempt earns only what raises the best worth so far; solving at attempt 2 is worth 0.5**2.
    obs, r, term, trunc, info = env.step("print(-1)")
    second_worth = 0.5 * info["pass_rate"]
    assert (
        r == pytest.approx(max(0.0, second_worth - first_value))
        and info["attempt"] == 1
        and not term
    )
    obs, r, term, trunc, info = env.step(base.oracle_actions()[0])
    assert (
        term
        and info["success"]
        and info["episode_return"] == pytest.approx(max(first_value, second_worth, 0.25) - 0.1)
    )
    assert "All tests passed" in obs


@pytest.mark.parametrize("answer", ["```python\n```", "def f(:", "x = 1\x00", "x" * 70000])
def test_empty_unparseable_or_huge_answers_are_invalid(answer: str) -> None:
    env = ragen_envs.make("ragen/DeepCoder-v0")
    obs0, _ = env.reset(seed=1)
    obs, r, term, trunc, info = env.step(answer)
    assert not info["action_is_valid"] and r == -0.1 and obs == obs0 and not term


def test_env_programs_run_contained() -> None:
    env = ragen_envs.make(
        "ragen/DeepCoder-v0",
        data_source="bundled:code-stdio-ours",
        time_limit_s=1,
        wall_time_limit_s=3,
    )
    env.reset(seed=0)
    t0 = time.perf_counter()
    _, r, term, _, info = env.step("import os\nwhile True:\n    os.fork()")
    assert r == 0.0 and info["first_failure_status"] in ("process_limit", "timeout")
    assert time.perf_counter() - t0 < 60


def test_max_steps_must_cover_the_attempts() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="max_steps"):
        ragen_envs.make("ragen/DeepCoder-v0", max_attempts=5)


def test_local_files_in_public_formats_load(tmp_path) -> None:
    path = tmp_path / "apps.jsonl"
    path.write_text(
        "\n".join(json.dumps(r) for r in (APPS_STDIN, APPS_CALL, TACO, LCB, DC_PRIME)) + "\n"
    )
    env = ragen_envs.make("ragen/DeepCoder-v0", data_source=str(path), split_mode="hash").unwrapped
    ids = {p.id for s in ("train", "validation", "test") for p in env.split_table()[s]}
    # APPS_STDIN and TACO share a statement, so they are one problem (same key, deduplicated).
    assert len(ids) == 4


def test_check_test_kind_reports_count() -> None:
    env = ragen_envs.make("ragen/DeepCoder-HumanEval-v0").unwrapped
    env.reset(seed=0)
    assert isinstance(env.item.tests[0], CheckTest) and env.num_tests == count_asserts(
        env.item.tests[0].code
    )


# ------------------------------------------- source splits of every format
def _ten(fmt: str) -> list[dict]:
    """Ten distinct records of one format (statements differ by their number)."""
    out = []
    for i in range(10):
        q = f"Problem {i}: add {i} to the two numbers given and print the sum."
        if fmt == "ragen":
            out.append(
                {"id": f"p{i}", "prompt": q, "tests": [{"input": "1 2\n", "output": f"{3 + i}\n"}]}
            )
        elif fmt == "humaneval":
            out.append(
                {
                    "task_id": f"HumanEval/{i}",
                    "prompt": f'def f{i}(x):\n    """{q}"""\n',
                    "canonical_solution": f"    return x + {i}\n",
                    "entry_point": f"f{i}",
                    "test": f"def check(candidate):\n    assert candidate(1) == {1 + i}\n",
                }
            )
        elif fmt == "mbpp":
            out.append(
                {
                    "task_id": 100 + i,
                    "text": q,
                    "code": f"def f{i}(x):\n    return x + {i}",
                    "test_list": [f"assert f{i}(1) == {1 + i}"],
                    "challenge_test_list": [],
                    "test_setup_code": "",
                }
            )
        elif fmt in ("apps", "taco"):
            out.append(
                {**TACO, "question": q, "name": f"n{i}"}
                if fmt == "taco"
                else {**APPS_STDIN, "question": q, "problem_id": i}
            )
        elif fmt == "livecodebench":
            out.append({**LCB_STDIN, "question_id": f"q{i}", "question_content": q})
        elif fmt == "deepcoder":
            out.append({**DC_PRIME, "problem": q})
    return out


CODE_FORMATS = ("ragen", "humaneval", "mbpp", "apps", "taco", "livecodebench", "deepcoder")


def test_every_code_format_keeps_its_source_split_so_test_problems_never_train(tmp_path) -> None:
    """With ``split_mode="source"`` a test-only file of any supported format is
    served only as ``test`` (HumanEval records used to lose the split: 8 of 10 went to train)."""
    assert set(CODE_FORMATS) == set(FORMATS) - {"auto"}
    for fmt in CODE_FORMATS:
        d = tmp_path / fmt
        d.mkdir()
        recs = _ten(fmt)
        assert {detect_format(r) for r in recs} == {fmt}
        (d / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
        env = ragen_envs.make(
            "ragen/DeepCoder-v0", data_source=str(d), split_mode="source"
        ).unwrapped
        sizes = dict(env.split_table().sizes)
        assert sizes == {"train": 0, "validation": 0, "test": 10}, (fmt, sizes)
        assert {p.source_split for p in env.split_table()["test"]} == {"test"}, fmt


def test_every_math_format_keeps_its_source_split(tmp_path) -> None:
    """The other data-backed readers (MetaMathQA's three formats)."""
    recs = (
        [{"query": f"What is {i} + 1?", "response": f"The answer is {i + 1}"} for i in range(4)]
        + [{"question": f"What is {i} + 2?", "answer": f"so #### {i + 2}"} for i in range(3)]
        + [{"question": f"What is {i} + 3?", "answer": str(i + 3)} for i in range(3)]
    )
    (tmp_path / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in recs))
    env = ragen_envs.make(
        "ragen/MetaMathQA-v0", data_source=str(tmp_path), split_mode="source", split="test"
    ).unwrapped
    assert dict(env.split_table().sizes) == {"train": 0, "validation": 0, "test": 10}


# ------------------------------------------------------------------ MBPP
MBPP_14 = {
    "task_id": 14,
    "text": "Write a python function to find the volume of a triangular prism.",
    "code": "def find_Volume(l,b,h) : \r\n    return ((l * b * h) / 2) ",
    "test_list": [
        "assert find_Volume(10,8,6) == 240",
        "assert find_Volume(3,2,2) == 6",
        "assert find_Volume(1,2,1) == 1",
    ],
    "test_setup_code": "",
    "challenge_test_list": [],
}
MBPP_SETUP = {
    "task_id": 900,
    "text": "Write a function to return the sorted distinct elements of a list.",
    "code": "def distinct(xs):\n    return sorted(set(xs))",
    "test_list": ["assert distinct(DATA) == [1, 2, 3]"],
    "test_setup_code": "DATA = [3, 1, 2, 3]",
    "challenge_test_list": ["assert distinct([]) == []", "assert set(distinct((5, 5))) == {5}"],
}
MBPP_SANITIZED = {
    "source_file": "Benchmark Questions Verification V2.ipynb",
    "task_id": 2,
    "prompt": "Write a function to find the shared elements from the given two lists.",
    "code": "def similar_elements(a, b):\n    return tuple(set(a) & set(b))",
    "test_imports": [],
    "test_list": ["assert set(similar_elements((3, 4, 5, 6),(5, 7, 4, 10))) == set((4, 5))"],
}


def test_mbpp_format_is_read_and_judged_with_numeric_equality() -> None:
    """MBPP records (full and sanitized) are read; task 14's reference solution,
    which returns 240.0 where the test expects 240, passes; a wrong one fails per assert."""
    p = problem_from_record(MBPP_14)
    assert detect_format(MBPP_14) == "mbpp" and p.id == "mbpp/14" and p.source == "mbpp"
    assert p.kind == "check" and p.tests[0].entry_point == "find_Volume" and count_tests(p) == 3
    assert "assert find_Volume(10,8,6) == 240" in p.prompt and p.key_text == MBPP_14["text"]
    assert judge(p.reference_solution, p, sandbox=FAST).all_passed
    int_only = "def find_Volume(l, b, h):\n    return l * b * h // 2\n"
    assert judge(int_only, p, sandbox=FAST).all_passed
    wrong = judge("def find_Volume(l, b, h):\n    return l * b * h\n", p, sandbox=FAST)
    assert (wrong.passed, wrong.total) == (0, 3) and "got 480" in wrong.first_failure.feedback
    s = problem_from_record(
        MBPP_SETUP
    )  # setup code runs first; challenge tests run but are not shown
    assert count_tests(s) == 3 and "distinct([])" not in s.prompt
    assert judge(s.reference_solution, s, sandbox=FAST).all_passed
    assert (
        judge("def distinct(xs):\n    return list(xs)\n", s, sandbox=FAST).passed == 2
    )  # not the shown one
    sz = problem_from_record(MBPP_SANITIZED)
    assert detect_format(MBPP_SANITIZED) == "mbpp" and sz.tests[0].entry_point == "similar_elements"
    assert judge(sz.reference_solution, sz, sandbox=FAST).all_passed
    with pytest.raises(ProblemFormatError, match="does not parse"):
        problem_from_record({**MBPP_14, "test_list": ["assert find_Volume(1,2 == 3"]})
    with pytest.raises(ProblemFormatError):
        problem_from_record({**MBPP_14, "test_list": "not a list of asserts"}, "mbpp")


def test_mbpp_file_trains_and_evaluates_in_the_deepcoder_env(tmp_path) -> None:
    """End to end: an MBPP ``test.jsonl`` serves its problems on the test split,
    and the oracle (the reference code) solves task 14 in the env."""
    (tmp_path / "test.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in (MBPP_14, MBPP_SETUP))
    )
    env = ragen_envs.make(
        "ragen/DeepCoder-v0", data_source=str(tmp_path), split_mode="source", split="test"
    )
    ids = [p.id for p in env.unwrapped.split_table()["test"]]
    assert sorted(ids) == ["mbpp/14", "mbpp/900"]
    env.reset(seed=0, options={"index": ids.index("mbpp/14")})
    item = env.unwrapped.item
    assert item.id == "mbpp/14"
    _, reward, terminated, _, info = env.step(f"```python\n{item.reference_solution}\n```")
    assert terminated and info["success"] and reward == pytest.approx(1.0)
