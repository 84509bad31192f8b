"""Red-team cases for reward integrity and env input handling (the reward side of the second red-team pass).

Each case is a payload from the second red-team pass that scored, crashed or
broke a promise on the starting commit; every test here failed there.  Programs run in
the real sandbox; the Lean cases use recorded/written verifier answers.
"""

from __future__ import annotations

import base64
import functools
import json
import pickle
import re
import zlib

import pytest

from ragen_envs.data.loaders import load_source
from ragen_envs.envs.deepcoder import problems as problems_mod
from ragen_envs.envs.deepcoder.judge import judge, outputs_match, reference_passes, values_match
from ragen_envs.envs.deepcoder.problems import (
    CallTest,
    CodeProblem,
    ProblemFormatError,
    problem_from_record,
)
from ragen_envs.sandbox import SandboxConfig

from .test_deepcoder import MBPP_14

FAST = SandboxConfig(cpu_time_s=2, wall_time_s=6, memory_mb=512)


@functools.cache
def _bundled(source: str) -> dict[str, CodeProblem]:
    return {p.id: p for p in map(problem_from_record, load_source(f"bundled:{source}"))}


def _ours(slug: str) -> CodeProblem:
    return _bundled("code-stdio-ours")[f"ragen-stdio/{slug}"]


def _humaneval(n: int) -> CodeProblem:
    return _bundled("humaneval")[f"HumanEval/{n}"]


# ------------------------------------------- Broke 2: integers get no float tolerance
@pytest.mark.parametrize(
    ("got", "expected", "ok"),
    [
        ("240.0", "240", True),  # the same integer written as a float
        ("240", "240", True),
        ("2.4e2", "240", True),
        ("1293853867265.0", "1293853866265", False),  # lcm off by 1000 (relative 7.7e-10)
        ("3.0000001", "3", False),
        ("1_000", "1000", False),
        ("nan", "3", False),
        ("1000000.5", "1000000.0", True),  # a non-integer expected keeps the tolerance
    ],
)
def test_expected_integer_token_matches_only_that_integer(got, expected, ok) -> None:
    assert outputs_match(got, expected) is ok


@pytest.mark.parametrize(
    ("got", "expected", "ok"),
    [(240.0, 240, True), (1293853867265.0, 1293853866265, False), (2.0000001, 2, False)],
)
def test_expected_integer_value_matches_only_that_integer(got, expected, ok) -> None:
    assert values_match(got, expected) is ok


@pytest.mark.parametrize(
    ("slug", "program"),
    [
        # gcd-lcm with the lcm off by 1000, printed as a float.
        (
            "gcd-lcm",
            "import math\na, b = map(int, input().split())\n"
            "g = math.gcd(a, b)\nprint(g, float(a // g * b + 1000))\n",
        ),
        # to-binary with the low 12 bits wrong, printed as a float.
        ("to-binary", "n = int(input())\nprint(float(bin(n | 4095)[2:]))\n"),
    ],
    ids=["gcd-lcm-off-by-1000", "to-binary-low-12-bits"],
)
def test_wrong_integers_printed_as_floats_do_not_score_full(slug, program) -> None:
    report = judge(program, _ours(slug), sandbox=FAST)
    assert not report.all_passed, [o.status for o in report.outcomes]


# ------------------------------------------- Broke 7: a factorial is not punctuation
@pytest.mark.parametrize(
    ("answer", "gold", "ok"),
    [
        (r"\boxed{210000!}", "210000", False),
        (r"The answer is \boxed{210000!}.", "210000", False),
        (r"The answer is 210000!", "210000", True),  # outside \boxed: an exclamation mark
        (r"\boxed{210000}!", "210000", True),  # the ! outside the box is prose
        (r"\boxed{5!}", "120", True),
        (r"\boxed{72.}", "72", True),  # trailing full stop is still punctuation
        # spaces mean nothing in math mode: a detached ! is still 72 factorial
        (r"\boxed{72 !}", "72", False),
        (r"\boxed{210000 !}", "210000", False),
        (r"\boxed{210000 \text{!}}", "210000", False),
        (r"\boxed{210000\text{ !}}", "210000", False),
        (r"\boxed{5 !}", "120", True),
        (r"The answer is 210000 !", "210000", True),  # outside \boxed: prose punctuation
    ],
)
def test_factorial_is_not_stripped_as_punctuation(answer, gold, ok) -> None:
    from ragen_envs.envs.metamathqa.equivalence import answers_equal
    from ragen_envs.envs.metamathqa.extract import extract_answer

    assert answers_equal(extract_answer(answer).text, gold) is ok


# ------------------------------------------- MetaMathQA: decimals are exact numbers
@pytest.mark.parametrize("checker", ["math_verify", "sympy"])
@pytest.mark.parametrize(
    ("answer", "gold", "ok"),
    [
        (r"\boxed{1.4142136}", r"\sqrt{2}", False),  # was accepted by math-verify's rounding
        (r"\boxed{3.1415927}", r"\pi", False),  # was accepted by math-verify's rounding
        (r"\boxed{0.3333333}", r"\frac{1}{3}", False),
        (r"\boxed{2\pi}", "6.28", False),  # the problem asked for a decimal: its gold is one
        (r"\boxed{1.414}", "1.41", False),  # rounded otherwise than asked
        (r"\boxed{1.41}", "1.41", True),
        (r"\boxed{0.5}", r"\frac{1}{2}", True),  # an exact decimal is exact
        (r"\boxed{\frac{5}{2}}", "2.5", True),
        (r"\boxed{0.5\sqrt{2}}", r"\frac{\sqrt{2}}{2}", True),
        (r"\boxed{1.5\pi}", r"\frac{3\pi}{2}", True),
    ],
)
def test_metamathqa_decimals_are_exact_numbers(answer, gold, ok, checker) -> None:
    if checker == "math_verify":
        pytest.importorskip("math_verify", reason="the default checker needs the 'math' extra")
    pytest.importorskip("sympy", reason="the symbolic checkers need the 'math' extra")
    from ragen_envs.envs.metamathqa.equivalence import answers_equal
    from ragen_envs.envs.metamathqa.extract import extract_answer

    assert answers_equal(extract_answer(answer).text, gold, checker=checker) is ok


def test_boxed_factorial_scores_zero_in_the_env() -> None:
    import ragen_envs

    env = ragen_envs.make("ragen/MetaMathQA-v0")
    env.reset(seed=0)
    gold = env.unwrapped._item.answer
    _, reward, _, _, info = env.step(rf"\boxed{{{gold}!}}")
    assert reward == 0.0 and not info["success"]


# ------------------------------------------- Broke 1: HumanEval helpers are the problem's
@pytest.mark.parametrize(
    ("n", "program"),
    [
        (32, "def poly(xs, x):\n    return 0.0\n\n\ndef find_zero(xs):\n    return 0.0\n"),
        (38, "def encode_cyclic(s):\n    return s\n\n\ndef decode_cyclic(s):\n    return s\n"),
        (50, "def encode_shift(s):\n    return s\n\n\ndef decode_shift(s):\n    return s\n"),
    ],
)
def test_candidate_helpers_do_not_replace_the_problems(n, program) -> None:
    report = judge(program, _humaneval(n), sandbox=FAST)
    assert report.passed == 0, [o.feedback for o in report.outcomes]


def test_self_referential_asserts_use_the_reference() -> None:
    problem = _humaneval(33)
    identity = judge("def sort_third(l):\n    return l\n", problem, sandbox=FAST)
    # Only [1, 2, 3], which is its own answer, passes; before, the 2 self-referential
    # asserts on other lists passed too (3 of 7).
    assert (identity.passed, identity.total) == (1, 7)
    assert reference_passes(problem, sandbox=FAST).all_passed


def test_a_candidate_with_its_own_correct_helpers_still_passes() -> None:
    problem = _humaneval(38)
    body = problem.reference_solution
    assert judge(body, problem, sandbox=FAST).all_passed


# ------------------------------------------- Smaller: a repr is not a value
@pytest.mark.parametrize("expected", ["abc", ["abc"]])
def test_object_whose_repr_is_the_expected_string_fails_a_call_test(expected) -> None:
    problem = CodeProblem(
        "redteam/repr",
        "redteam",
        "f() returns 'abc'",
        (CallTest("f", (), expected, accept_wrapped=True),),
    )
    program = (
        "class X:\n    def __repr__(self):\n        return 'abc'\n\n\ndef f():\n    return X()\n"
    )
    report = judge(program, problem, sandbox=FAST)
    assert report.outcomes[0].status == "wrong_answer", report.outcomes
    assert judge("def f():\n    return 'abc'\n", problem, sandbox=FAST).all_passed


# ------------------------------------------- DeepCoder: results of types the benchmark's == accepts
#: Correct programs whose results are of a type Python's == (MBPP's own test) accepts.
EXACT_TYPE_PROGRAMS = {
    "int-subclass": (
        "class N(int):\n    pass\n\n\ndef find_Volume(l, b, h):\n    return N(l * b * h // 2)\n"
    ),
    "float-subclass": (
        "class F(float):\n    pass\n\n\ndef find_Volume(l, b, h):\n    return F(l * b * h / 2)\n"
    ),
    "fraction": (
        "from fractions import Fraction\n\n\ndef find_Volume(l, b, h):\n"
        "    return Fraction(l * b * h, 2)\n"
    ),
    "decimal": (
        "from decimal import Decimal\n\n\ndef find_Volume(l, b, h):\n"
        "    return Decimal(l * b * h) / 2\n"
    ),
}


@pytest.mark.parametrize("kind", sorted(EXACT_TYPE_PROGRAMS))
def test_mbpp_results_of_types_its_own_equality_accepts_pass(kind) -> None:
    problem = problem_from_record(MBPP_14)
    report = judge(EXACT_TYPE_PROGRAMS[kind], problem, sandbox=FAST)
    assert report.all_passed, [o.feedback for o in report.outcomes]


def _call_problem(expected, fn: str = "f") -> CodeProblem:
    return CodeProblem("redteam/types", "redteam", "f() returns it", (CallTest(fn, (), expected),))


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("class N(int):\n    pass\n\n\ndef f():\n    return N(240)\n", 240),
        ("class S(str):\n    pass\n\n\ndef f():\n    return S('abc')\n", "abc"),
        ("class L(list):\n    pass\n\n\ndef f():\n    return L([1, 2, 3])\n", [1, 2, 3]),
        (
            "class L(list):\n    pass\n\n\nclass N(int):\n    pass\n\n\n"
            "def f():\n    return L([N(1), [N(2)]])\n",
            [1, [2]],
        ),
        ("class D(dict):\n    pass\n\n\ndef f():\n    return D(a=1)\n", {"a": 1}),
        ("from fractions import Fraction\n\n\ndef f():\n    return Fraction(3, 2)\n", 1.5),
        ("from fractions import Fraction\n\n\ndef f():\n    return Fraction(480, 2)\n", 240),
        ("from decimal import Decimal\n\n\ndef f():\n    return Decimal('2.5')\n", 2.5),
        ("from decimal import Decimal\n\n\ndef f():\n    return Decimal('240.0')\n", 240),
        (  # a LeetCode-style method
            "class N(int):\n    pass\n\n\nclass Solution:\n    def f(self):\n        return N(7)\n",
            7,
        ),
    ],
    ids=[
        "int-subclass",
        "str-subclass",
        "list-subclass",
        "nested-subclasses",
        "dict-subclass",
        "fraction",
        "integral-fraction",
        "decimal",
        "integral-decimal",
        "method",
    ],
)
def test_call_results_of_types_python_equality_accepts_pass(program, expected) -> None:
    report = judge(program, _call_problem(expected), sandbox=FAST)
    assert report.all_passed, [o.feedback for o in report.outcomes]


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        ("class N(int):\n    pass\n\n\ndef f():\n    return N(241)\n", 240),  # wrong value
        (  # an int subclass whose == lies: compared by its int value, 1
            "class N(int):\n    def __eq__(self, other):\n        return True\n\n"
            "    __hash__ = int.__hash__\n\n\ndef f():\n    return N(1)\n",
            240,
        ),
        (  # a str subclass whose __str__ lies: read with str's own method
            "class S(str):\n    def __str__(self):\n        return 'abc'\n\n\n"
            "def f():\n    return S('xyz')\n",
            "abc",
        ),
        ("from fractions import Fraction\n\n\ndef f():\n    return Fraction(1, 3)\n", 0.5),
    ],
    ids=["wrong-int-subclass", "lying-eq", "lying-str", "wrong-fraction"],
)
def test_converted_results_are_still_judged_outside_the_candidate(program, expected) -> None:
    report = judge(program, _call_problem(expected), sandbox=FAST)
    assert report.outcomes[0].status == "wrong_answer", report.outcomes


def test_mbpp_lying_equality_still_fails() -> None:
    program = (
        "class N(int):\n    def __eq__(self, other):\n        return True\n\n"
        "    __hash__ = int.__hash__\n\n\ndef find_Volume(l, b, h):\n    return N(0)\n"
    )
    report = judge(program, problem_from_record(MBPP_14), sandbox=FAST)
    assert report.passed == 0, [o.feedback for o in report.outcomes]


def test_a_program_that_exits_at_top_level_is_still_called() -> None:
    program = "import sys\n\n\ndef f():\n    return 240\n\n\nsys.exit(0)\n"
    assert judge(program, _call_problem(240), sandbox=FAST).all_passed


# ------------------------------------------- Crashes: LiveCodeBench records
def _lcb_record(qid: str, private: str) -> dict:
    return {
        "question_id": qid,
        "question_title": "t",
        "question_content": f"Print 1. ({qid})",
        "public_test_cases": json.dumps([{"input": "", "output": "1", "testtype": "stdin"}]),
        "private_test_cases": private,
        "metadata": "{}",
    }


def _zlib_bomb(mib: int) -> str:
    """base64 of a zlib stream expanding to ``mib`` MiB of zeros (built in ~1 ms per MiB).

    Each 1 MiB deflate block ends with a full flush (no back-references across
    blocks), so the same bytes repeat; the stream is refused before its checksum.
    """
    co = zlib.compressobj(9, zlib.DEFLATED, -15)
    block = co.compress(bytes(1 << 20)) + co.flush(zlib.Z_FULL_FLUSH)
    return base64.b64encode(b"\x78\xda" + block * mib + co.flush()).decode()


def test_lcb_zlib_bomb_is_refused_and_named(monkeypatch) -> None:
    assert problems_mod.MAX_LCB_TESTS_BYTES < 1 << 30
    monkeypatch.setattr(problems_mod, "MAX_LCB_TESTS_BYTES", 16 << 20)  # keeps the test fast
    bomb = _zlib_bomb(1024)  # the payload: ~1 MB expanding to 1 GiB
    assert len(bomb) < 2 << 20
    with pytest.raises(ProblemFormatError, match=r"'lcb-bomb'.*more than 16 MiB"):
        problem_from_record(_lcb_record("lcb-bomb", bomb))


def _pickled(value: object) -> str:
    return base64.b64encode(zlib.compress(pickle.dumps(value))).decode()


@pytest.mark.parametrize(
    "private",
    [_pickled([["1", "1"]]), _pickled(json.dumps([["1", "1"]])), _zlib_bomb(40)],
    ids=["pickled-list-of-lists", "json-list-of-lists", "zlib-bomb-40MiB"],
)
def test_one_bad_lcb_record_is_skipped_by_name_not_every_split(
    tmp_path, monkeypatch, private
) -> None:
    monkeypatch.setattr(problems_mod, "MAX_LCB_TESTS_BYTES", 16 << 20)  # keeps the test fast
    import ragen_envs

    good = [_lcb_record(f"good-{i}", "") for i in range(12)]
    path = tmp_path / "lcb"
    path.mkdir()
    with open(path / "test.jsonl", "w") as f:
        for rec in [*good, _lcb_record("bad-one", private)]:
            f.write(json.dumps(rec) + "\n")
    env = ragen_envs.make(
        "ragen/DeepCoder-v0", data_source=str(path), split="test", split_mode="source"
    ).unwrapped
    with pytest.warns(UserWarning, match="skipped 1 malformed record.*'bad-one'"):
        env.reset(seed=0)
    assert len(env.split_items()) == 12
    assert any("'bad-one'" in m for m in env.skipped_records)


# ------------------------------------------- Data loaders: type and size before text
def _shared_nested_lists(levels: int) -> list:
    """``levels`` nested pairs of the same list: a few bytes per level as a pickle (its memo
    shares them), ``2**levels`` strings when printed."""
    x: object = "1"
    for _ in range(levels):
        x = [x, x]
    return x  # type: ignore[return-value]


def _limit_memory() -> None:  # in the child, before exec: 1.5 GiB of address space
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 << 29, 3 << 29))


def test_lcb_pickle_of_shared_nested_lists_is_refused_without_expanding() -> None:
    """The payload runs in a child with a memory limit, so the code that stringified it
    cannot take this test process (or the machine) down with it."""
    import subprocess
    import sys
    from pathlib import Path

    raw = pickle.dumps([{"input": _shared_nested_lists(78), "output": "1", "testtype": "stdin"}])
    assert len(raw) < 600  # the red-team's pickle was 534 bytes
    record = _lcb_record("lcb-shared", base64.b64encode(zlib.compress(raw)).decode())
    assert len(json.dumps(record)) < 1000  # its record 926 bytes
    code = (
        "import json, sys\n"
        "from ragen_envs.envs.deepcoder.problems import ProblemFormatError, problem_from_record\n"
        "try:\n    problem_from_record(json.loads(sys.stdin.read()))\n"
        "except ProblemFormatError as exc:\n    print(exc); sys.exit(2)\n"
    )
    root = Path(__file__).resolve().parents[2]
    try:
        proc = subprocess.run(
            [sys.executable, "-c", code],
            input=json.dumps(record),
            capture_output=True,
            text=True,
            timeout=300,  # a hang guard only: the expansion hits the memory limit in seconds
            cwd=root,
            preexec_fn=_limit_memory,
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the shared nested lists were still being expanded after 300 s")
    assert proc.returncode == 2, proc.stderr[-500:]
    assert proc.stdout.strip() == (
        "livecodebench record 'lcb-shared': LiveCodeBench test case 'input' is a list "
        "holding a list, not only strings"
    )


@pytest.mark.parametrize(
    ("case", "refusal"),
    [
        ({"input": [["1"], ["2"]], "output": "1"}, "'input' is a list holding a list"),
        ({"input": "", "output": 1}, "'output' is a int, not a string"),
        ({"input": "", "output": {"a": "1"}}, "'output' is a dict, not a string"),
        ({"input": "", "output": "1", "testtype": ["stdin"]}, "'testtype' is a list"),
        (
            {"input": "1", "output": "1", "testtype": "functional", "metadata": {"func_name": [1]}},
            "'metadata.func_name' is a list",
        ),
    ],
    ids=["nested-input", "int-output", "dict-output", "list-testtype", "list-func-name"],
)
def test_lcb_test_case_fields_are_text_only(case, refusal) -> None:
    private = base64.b64encode(zlib.compress(pickle.dumps([case]))).decode()
    with pytest.raises(ProblemFormatError, match=re.escape(refusal)):
        problem_from_record(_lcb_record("lcb-typed", private))


def test_lcb_flat_lists_of_text_are_still_read() -> None:
    private = _pickled(json.dumps([{"input": ["2", "3"], "output": ["5"], "testtype": "stdin"}]))
    problem = problem_from_record(_lcb_record("lcb-lines", private))
    assert [(t.input, t.output) for t in problem.tests[1:]] == [("2\n3", "5")]


def test_lcb_text_over_the_cap_is_refused(monkeypatch) -> None:
    monkeypatch.setattr(problems_mod, "MAX_LCB_TESTS_BYTES", 1 << 20)
    big = "9" * (1 << 19)
    # the same string referenced 5 times: 2.5 MiB of text from a ~0.5 MiB pickle
    raw = pickle.dumps([{"input": [big] * 5, "output": "1", "testtype": "stdin"}])
    assert len(zlib.decompress(zlib.compress(raw))) < 1 << 20
    with pytest.raises(ProblemFormatError, match="more than 1 MiB of text"):
        problem_from_record(_lcb_record("lcb-big", base64.b64encode(zlib.compress(raw)).decode()))


DEEP = "[" * 100_000 + "]" * 100_000


def _lcb_dir(tmp_path, bad_line: str) -> str:
    path = tmp_path / "lcb"
    path.mkdir()
    with open(path / "test.jsonl", "w") as f:
        for i in range(12):
            f.write(json.dumps(_lcb_record(f"good-{i}", "")) + "\n")
        f.write(bad_line + "\n")
    return str(path)


def _lcb_env(src: str):
    import ragen_envs

    return ragen_envs.make(
        "ragen/DeepCoder-v0", data_source=src, split="test", split_mode="source"
    ).unwrapped


def test_a_deep_jsonl_line_is_skipped_and_named_by_file_and_line(tmp_path) -> None:
    rec = json.dumps(_lcb_record("deep-one", ""))
    env = _lcb_env(_lcb_dir(tmp_path, rec[:-1] + ', "extra": ' + DEEP + "}"))
    with pytest.warns(UserWarning, match=r"test\.jsonl:13: nested deeper than 100 levels"):
        env.reset(seed=0)
    assert len(env.split_items()) == 12
    assert any(
        m.endswith("test.jsonl:13: nested deeper than 100 levels (skipped)")
        for m in env.skipped_records
    ), env.skipped_records


def test_a_deep_json_test_field_skips_only_its_record(tmp_path) -> None:
    env = _lcb_env(_lcb_dir(tmp_path, json.dumps(_lcb_record("deep-field", DEEP))))
    with pytest.warns(UserWarning, match=r"'deep-field'.*nested deeper than 100 levels"):
        env.reset(seed=0)
    assert len(env.split_items()) == 12


def test_a_deep_json_file_is_one_error_naming_it(tmp_path) -> None:
    from ragen_envs.data.loaders import DataSourceError, read_records

    path = tmp_path / "deep.json"
    path.write_text(DEEP)
    with pytest.raises(DataSourceError, match=r"deep\.json: nested deeper than 100 levels"):
        read_records(path)


# ------------------------------------------- Held-out: a lone split file keeps its split
def _write_jsonl(path, records) -> str:
    with open(path, "w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    return str(path)


@pytest.mark.parametrize("name", ["test.jsonl", "test-00000-of-00001.jsonl"])
def test_single_humaneval_test_file_is_served_only_as_test(tmp_path, name) -> None:
    import ragen_envs

    recs = list(load_source("bundled:humaneval"))[:10]
    path = _write_jsonl(tmp_path / name, recs)
    env = ragen_envs.make(
        "ragen/DeepCoder-v0", data_source=path, split="test", split_mode="source"
    ).unwrapped
    sizes = env.split_table().sizes
    assert (sizes["train"], sizes["validation"], sizes["test"]) == (0, 0, 10)


def test_single_gsm8k_test_file_is_served_only_as_test(tmp_path) -> None:
    import ragen_envs

    recs = [
        {"question": f"What is {i} + 1?", "answer": f"{i}+1={i + 1}\n#### {i + 1}"}
        for i in range(20)
    ]
    path = _write_jsonl(tmp_path / "test.jsonl", recs)
    env = ragen_envs.make(
        "ragen/MetaMathQA-v0", data_source=path, split="test", split_mode="source"
    ).unwrapped
    sizes = env.split_table().sizes
    assert (sizes["train"], sizes["validation"], sizes["test"]) == (0, 0, 20)


# ------------------------------------------- Held-out: SearchQA finish[Paris].
@pytest.mark.parametrize("tail", [".", "!", " .", "?!"])
def test_searchqa_punctuation_after_finish_is_a_deviation_not_invalid(tail) -> None:
    import ragen_envs

    env = ragen_envs.make("ragen/SearchQA-v0")
    env.reset(seed=0)
    gold = env.unwrapped._item.answers[0]
    _, reward, terminated, _, info = env.step(f"finish[{gold}]{tail}")
    assert info["action_is_valid"] and terminated and reward == 1.0
    assert info["answer"] == gold and tail.strip() in info["format_deviation"]
    env.reset(seed=0)
    _, _, _, _, clean = env.step(f"finish[{gold}]")
    assert "format_deviation" not in clean
    env.reset(seed=0)
    _, reward, _, _, info = env.step(f"finish[{gold}] because")
    assert not info["action_is_valid"] and reward < 0  # other trailing text stays invalid


# ------------------------------------------- Held-out: env info keys on every step
@pytest.mark.parametrize(
    ("env_id", "keys"),
    [
        ("ragen/RubiksCube-v0", ("state", "distance")),
        ("ragen/2048-v0", ("board", "score", "max_tile")),
    ],
)
@pytest.mark.parametrize(
    "action", ["U" * 70_000, 3, None, ["up"]], ids=["long", "int", "none", "list"]
)
def test_irregular_actions_still_give_the_promised_info_keys(env_id, keys, action) -> None:
    import ragen_envs

    env = ragen_envs.make(env_id)
    _, first = env.reset(seed=0)
    _, reward, _, _, info = env.step(action)
    assert not info["action_is_valid"] and reward < 0
    assert all(k in info for k in keys), sorted(info)
    for k in keys:
        if k in first:
            assert info[k] == first[k]  # unchanged state


# ------------------------------------------- Lean: sorry without the word
ADMIT_GOAL = "run_tac do Lean.Elab.admitGoal (← Lean.Elab.Tactic.getMainGoal)"
_DECL_SORRY = {
    "severity": "warning",
    "pos": {"line": 1, "column": 8},
    "data": "declaration uses 'sorry'",
}


@pytest.mark.parametrize("text", ["declaration uses 'sorry'", "declaration uses `sorry`"])
def test_command_answer_with_a_sorry_warning_is_not_a_complete_proof(text) -> None:
    from ragen_envs.envs.lean.protocol import command_check

    response = {"env": 0, "messages": [{**_DECL_SORRY, "data": text}]}  # admitGoal: no sorries
    check = command_check(response, probe_line=3, first_line=2)
    assert check.outcome == "rejected" and check.uses_sorry and not check.complete


def test_tactic_answer_with_a_sorry_warning_is_not_a_complete_proof() -> None:
    from ragen_envs.envs.lean.protocol import tactic_check

    # A REPL without proofStatus, answering the admitGoal tactic with no goal left.
    check = tactic_check({"proofState": 1, "goals": [], "messages": [_DECL_SORRY]})
    assert check.outcome == "rejected" and check.uses_sorry


def test_admit_goal_through_run_tac_is_rejected_by_the_env() -> None:
    pytest.importorskip("httpx", reason="the Kimina back-end needs httpx (the 'lean' extra)")
    from .lean_support import KiminaServer, lean_env

    with KiminaServer() as server:
        _assert_admit_goal_rejected(lean_env(server.url))


def _assert_admit_goal_rejected(env) -> None:
    """The env refuses run_tac before Lean; the verifier alone rejects it as a sorry."""
    env.reset(options={"theorem": "complex_and"})
    _, reward, terminated, _, info = env.step(ADMIT_GOAL)
    assert (
        not info["action_is_valid"]
        and not info["success"]
        and "'run_tac'" in (info["invalid_reason"])
    )
    assert reward == pytest.approx(-0.1) and not terminated
    check = env.verifier().check(env._item, [], ADMIT_GOAL)
    env.close()
    assert check.outcome == "rejected" and check.uses_sorry and not check.complete


# ------------------------------------------- Time: a per-step wall budget
SLEEPER = (
    "import sys, time\ndata = sys.stdin.read().split()\nt = int(data[0])\n"
    "for i in range(t):\n    print(int(data[1 + 2 * i]) + int(data[2 + 2 * i]))\n"
    "sys.stdout.flush()\ntime.sleep(100)\n"
)


def test_a_sleeping_correct_program_costs_at_most_the_step_budget() -> None:
    slow = SandboxConfig(cpu_time_s=2, wall_time_s=1.5, memory_mb=512)
    report = judge(SLEEPER, _ours("pair-sums"), sandbox=slow, time_budget_s=2.0)
    statuses = [o.status for o in report.outcomes]
    assert report.total == 6 and report.passed == 0
    assert statuses.count("not_run") >= 4, statuses  # at most ~2 runs fit in 2 s
    assert "time budget" in report.outcomes[-1].feedback


def test_the_env_applies_its_step_budget() -> None:
    import time

    import ragen_envs

    wall = 1.5
    env = ragen_envs.make(
        "ragen/DeepCoder-v0",
        data_source="bundled:code-stdio-ours",
        split="train",
        wall_time_limit_s=wall,
        step_time_budget_s=2.0,
    ).unwrapped
    items = env.split_items()
    seed = next(i for i, p in enumerate(items) if p.id == "ragen-stdio/pair-sums")
    env.reset(seed=seed)
    t0 = time.monotonic()
    _, _, _, _, info = env.step(f"```python\n{SLEEPER}```")
    elapsed = time.monotonic() - t0
    assert info["tests_total"] == 6 and info["tests_passed"] == 0
    assert elapsed < 4 * wall, elapsed  # without the budget: 6 runs x 1.5 s = 9 s


# ------------------------------------------- Time: math-verify from a worker thread
@pytest.mark.slow
def test_math_verify_is_bounded_off_the_main_thread() -> None:
    """The bench runs envs in threads, where math-verify's signal.alarm does nothing."""
    import threading

    pytest.importorskip("math_verify", reason="the default checker needs the 'math' extra")
    from ragen_envs.envs.metamathqa import equivalence

    results: dict[str, bool] = {}
    cases = {
        "binom": (r"\binom{10^{9}}{5\cdot 10^{8}}", "1"),  # > 60 s unbounded in a thread
        "equal": (r"\frac{\sqrt{2}}{2}", r"\frac{1}{\sqrt{2}}"),  # the worker still works
    }
    for name, (pred, gold) in cases.items():
        th = threading.Thread(
            target=lambda n=name, p=pred, g=gold: results.__setitem__(
                n, equivalence.answers_equal(p, g)
            ),
            daemon=True,
        )
        th.start()
        # Worker start-up (imports) + the worker's own 5 s alarms; the host kills it
        # after WORKER_TIMEOUT_S (20 s) at the latest.
        th.join(equivalence.WORKER_START_S + equivalence.WORKER_TIMEOUT_S)
        assert not th.is_alive(), f"{name}: verification still running"
    assert results == {"binom": False, "equal": True}


# ------------------------------------------- Reward without solving: strict variants
def _env_on(env_id: str, item_id: str, **config):
    import ragen_envs

    env = ragen_envs.make(env_id, **config)
    items = env.unwrapped.split_items()
    seed = next(i for i, it in enumerate(items) if env.unwrapped._item_id(it) == item_id)
    env.reset(seed=seed)
    return env


@pytest.mark.parametrize(("mode", "passed", "total"), [("scored", 1, 6), ("excluded", 0, 5)])
def test_deepcoder_example_output_earns_nothing_when_examples_are_excluded(
    mode, passed, total
) -> None:
    env = _env_on(
        "ragen/DeepCoder-v0",
        "ragen-stdio/pair-sums",
        data_source="bundled:code-stdio-ours",
        example_tests=mode,
    )
    _, reward, _, _, info = env.step("print('3\\n6')")  # the statement's example output
    assert (info["tests_passed"], info["tests_total"]) == (passed, total)
    assert reward == pytest.approx(passed / total)


def test_deepcoder_reference_still_scores_full_without_examples() -> None:
    env = _env_on(
        "ragen/DeepCoder-v0",
        "ragen-stdio/pair-sums",
        data_source="bundled:code-stdio-ours",
        example_tests="excluded",
    )
    _, reward, _, _, info = env.step(env.unwrapped.oracle_actions()[0])
    assert reward == 1.0 and info["success"] and info["tests_total"] == 5


def _million_question(env) -> int:
    items = env.unwrapped.split_items()
    return next(i for i, it in enumerate(items) if any("million" in a for a in it.answers))


@pytest.mark.parametrize(("strict", "expected"), [(False, 2 / 3), (True, 0.0)])
def test_searchqa_constant_million_earns_nothing_in_the_strict_variant(strict, expected) -> None:
    import ragen_envs

    env = ragen_envs.make("ragen/SearchQA-v0", numbers_must_match=strict)
    seed = _million_question(env)
    env.reset(seed=seed)
    gold = env.unwrapped._item.answers[0]
    assert gold.split()[-1] == "million" and len(gold.split()) == 2, gold
    _, reward, *_ = env.step("finish[million]")
    assert reward == pytest.approx(expected)
    env.reset(seed=seed)
    assert env.step(f"finish[{gold}]")[1] == 1.0  # the gold itself still scores


def _wrong_digit(u):
    return next(
        (c, d)
        for c in range(len(u._grid))
        if not u._grid[c] and not u._givens[c] and c not in u._earned
        for d in range(1, u._g.n + 1)
        if d != u._solution[c] and not u.conflicts(c, d)
    )


@pytest.mark.parametrize(("rule", "expected"), [("legal", 5.0), ("correct", 0.0)])
def test_sudoku_wrong_digits_earn_nothing_under_the_correct_rule(rule, expected) -> None:
    import ragen_envs

    env = ragen_envs.make("ragen/Sudoku-9x9-Hard-v0", placement_rule=rule)
    env.reset(seed=0)
    u, total = env.unwrapped, 0.0
    for _ in range(5):
        c, d = _wrong_digit(u)
        _, reward, _, _, info = env.step(f"{u._g.row[c] + 1},{u._g.col[c] + 1},{d}")
        assert info["action_is_valid"]
        total += reward
    assert total == expected
    c = next(
        c for c in range(len(u._grid)) if not u._grid[c] and not u.conflicts(c, u._solution[c])
    )
    _, reward, *_ = env.step(f"{u._g.row[c] + 1},{u._g.col[c] + 1},{u._solution[c]}")
    assert reward == 1.0  # the solution's digit earns under either rule


# ------------------------------------------- Lean: #print axioms after a finished proof
def _axioms_response(*listings: tuple[int, str]) -> dict:
    return {
        "env": 0,
        "messages": [
            {"severity": "info", "pos": {"line": line, "column": 0}, "data": text}
            for line, text in listings
        ],
    }


@pytest.mark.parametrize(
    ("listings", "allowed", "uses_sorry"),
    [
        ([(4, "'t' depends on axioms: [propext, Classical.choice, Quot.sound]")], True, False),
        ([(4, "'t' does not depend on any axioms")], True, False),
        ([(4, "'t' depends on axioms: [propext, sorryAx]")], False, True),
        ([(4, "'t' depends on axioms: [cheat]")], False, False),
        ([(4, "'t' depends on axioms: [Lean.ofReduceBool]")], False, False),  # native_decide
        ([(4, "unknown constant 't'")], False, False),  # no listing: not proven
        # a line shaped like the answer, logged by a tactic (line 2), is never read
        (
            [(2, "'t' does not depend on any axioms"), (4, "'t' depends on axioms: [cheat]")],
            False,
            False,
        ),
        ([(2, "'t' does not depend on any axioms")], False, False),  # #exit: no answer on line 4
        ([(4, "'Nat.add' does not depend on any axioms")], False, False),  # another constant
        ([(4, "'t' does not depend on any axioms, trust me")], False, False),  # not the sentence
        (  # two messages on the asked line: not Lean's single answer
            [(4, "'t' does not depend on any axioms"), (4, "'t' depends on axioms: [cheat]")],
            False,
            False,
        ),
    ],
)
def test_axioms_verdict(listings, allowed, uses_sorry) -> None:
    from ragen_envs.envs.lean.protocol import axioms_verdict

    verdict = axioms_verdict(_axioms_response(*listings), name="t", line=4)
    assert (verdict is None) is allowed
    if verdict is not None:
        assert verdict.outcome == "rejected" and verdict.uses_sorry is uses_sorry


def test_admit_goal_in_a_repl_without_proof_status_is_caught_by_axioms() -> None:
    """An older REPL (no proofStatus) answers admitGoal with no goal and no message; the
    written #print axioms answer lists sorryAx (tests/data/lean/written/admit_goal.in and .expected.out)."""
    from .lean_support import lean_env, repl_spec

    _assert_admit_goal_rejected(lean_env(repl_spec()))


CHEAT = (
    "run_tac do Lean.addDecl (.axiomDecl {name := `cheat, levelParams := [], "
    "type := ← Lean.Elab.Tactic.getMainTarget, isUnsafe := false}); "
    "Lean.Elab.Tactic.closeMainGoal `cheat (.const `cheat [])"
)
#: A run_tac that closes the goal with its own axiom and logs a line shaped like the
#: answer of ``#print axioms complex_and``.
LOG_FAKE = CHEAT + "; Lean.logInfo \"'complex_and' does not depend on any axioms\""
#: A whole-proof "tactic" that ends the by block, prints another constant's axioms and
#: stops Lean before the env's own #print axioms.
EXIT_APPEND = "native_decide\n#print axioms Nat.add\n#exit"

#: (theorem, tactic) of each payload; the answers Lean would give are written in
#: tests/data/lean/kimina-written.jsonl and tests/data/lean/written/{own_axiom,native_decide}.*
LEAN_PAYLOADS = {
    "run_tac-logs-fake-axiom-line": ("complex_and", LOG_FAKE),
    "appends-print-axioms-Nat.add-and-exit": ("two_eq", EXIT_APPEND),
    "own-axiom-by-addDecl": ("complex_and", CHEAT),
    "native_decide": ("two_eq", "native_decide"),
}


def _lean_env_on(mode: str, stack, tmp_path):
    from .lean_support import KiminaServer, lean_env, repl_spec

    if mode == "kimina":
        pytest.importorskip("httpx", reason="the Kimina back-end needs httpx (the 'lean' extra)")
        server = stack.enter_context(KiminaServer())
        env = lean_env(server.url)

        def sent() -> list[str]:
            return [
                s["code"]
                for path, body in server.requests
                if path == "/api/check"
                for s in body["snippets"]
            ]

    else:
        log = tmp_path / "requests.jsonl"
        env = lean_env(repl_spec("--log", str(log)))

        def sent() -> list[str]:
            if not log.exists():
                return []
            rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
            return [r.get("tactic") or r.get("cmd") for r in rows]

    stack.callback(env.close)
    return env, sent


@pytest.mark.parametrize("payload", sorted(LEAN_PAYLOADS))
@pytest.mark.parametrize("mode", ["repl", "kimina"])
def test_lean_command_tokens_are_refused_before_lean(mode, payload, tmp_path) -> None:
    import contextlib

    theorem, tactic = LEAN_PAYLOADS[payload]
    with contextlib.ExitStack() as stack:
        env, sent = _lean_env_on(mode, stack, tmp_path)
        env.reset(options={"theorem": theorem})
        _, reward, terminated, truncated, info = env.step(tactic)
        assert not info["action_is_valid"] and not info["success"], info
        assert reward == pytest.approx(-0.1) and not terminated and not truncated
        assert "refused" in info["invalid_reason"]
        assert not any(tactic in text for text in sent() if text), sent()


@pytest.mark.parametrize(
    ("mode", "payload"),
    [
        ("kimina", "run_tac-logs-fake-axiom-line"),
        ("kimina", "appends-print-axioms-Nat.add-and-exit"),
        ("kimina", "own-axiom-by-addDecl"),
        ("kimina", "native_decide"),
        ("repl", "run_tac-logs-fake-axiom-line"),
        ("repl", "own-axiom-by-addDecl"),
        ("repl", "native_decide"),
        # (the REPL's tactic mode parses one tactic, so it cannot carry #print / #exit)
    ],
)
def test_lean_axioms_are_read_only_from_the_answer_to_the_envs_own_command(
    mode, payload, tmp_path
) -> None:
    """The verifier alone (past the env's token refusal) still rejects every payload."""
    import contextlib

    theorem, tactic = LEAN_PAYLOADS[payload]
    with contextlib.ExitStack() as stack:
        env, sent = _lean_env_on(mode, stack, tmp_path)
        env.reset(options={"theorem": theorem})
        check = env.verifier().check(env._item, [], tactic)
        assert check.outcome == "rejected" and not check.complete, check
        assert any(f"#print axioms {theorem}" in text for text in sent() if text)


def test_a_proof_by_its_own_axiom_is_rejected_through_kimina() -> None:
    pytest.importorskip("httpx", reason="the Kimina back-end needs httpx (the 'lean' extra)")
    from .lean_support import PROOF, KiminaServer, lean_env

    with KiminaServer() as server:
        env = lean_env(server.url)
        env.reset(options={"theorem": "complex_and"})
        check = env.verifier().check(env._item, [], CHEAT)
        assert check.outcome == "rejected" and not check.complete
        assert check.reason == "the proof depends on axiom(s) cheat"
        obs, reward, terminated, _, info = env.step(CHEAT)  # the env refuses it before Lean
        assert not info["action_is_valid"] and not terminated and reward == pytest.approx(-0.1)
        for tactic in PROOF:  # the recorded proof still succeeds, axioms checked
            *_, info = env.step(tactic)
        env.close()
    assert info["success"]
    assert any(
        "#print axioms complex_and" in s["code"]
        for body in (b for p, b in server.requests if p == "/api/check")
        for s in body["snippets"]
    )


@pytest.mark.parametrize(
    ("tactic", "token"),
    [
        ("native_decide", "native_decide"),
        ("decide +native", "native"),
        ("exact Lean.ofReduceBool _ _ rfl", "Lean"),
        ("exact _root_.Lean.ofReduceBool _ _ rfl", "Lean"),
        ('open Lean Elab Tactic in\nrun_tac logInfo "x"', "Lean"),
        ("run_cmd pure ()", "run_cmd"),
        ("set_option maxRecDepth 100000 in\nnorm_num", "set_option"),
        ('elab "cheat" : tactic => pure ()', "elab"),
        ("norm_num\naxiom cheat : False", "axiom"),
        ("norm_num\n#eval 1", "#eval"),
        ("rfl\n#exit", "#exit"),
        ("simp\n  #print axioms Nat.add", "#print"),
        ("norm_num\ntheorem other : True := trivial", "theorem"),
    ],
)
def test_lean_tactic_guard_names_the_refused_token(tactic, token) -> None:
    from ragen_envs.envs.lean.guard import refused_token

    assert refused_token(tactic) == token


@pytest.mark.parametrize(
    "tactic",
    [
        "norm_num [Nat.add_comm] at h₀ ⊢",
        "nlinarith [sq_nonneg (x - 1), sq_nonneg (x + 1)]",
        "decide",
        "exact #[1, 2].size_pos",  # an array literal is not a hash command
        "simp only [Finset.sum_range_succ, h.def_eq]",  # a field named def_eq
        "infer_instance",
        "exact ⟨h1.left, h2 h1.right⟩",
        "field_simp\nring",
    ],
)
def test_lean_tactic_guard_lets_ordinary_tactics_through(tactic) -> None:
    from ragen_envs.envs.lean.guard import refused_token

    assert refused_token(tactic) is None
