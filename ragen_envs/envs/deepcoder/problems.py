"""Coding problems and their tests, and readers for the public data set formats.

A :class:`CodeProblem` holds a statement and a tuple of tests of one of three kinds:

* :class:`StdioTest` — feed ``input`` on stdin, compare stdout with ``output``;
* :class:`CallTest` — call function ``fn_name`` with ``args``, compare the return value
  with ``expected``;
* :class:`CheckTest` — HumanEval style: test code defining ``check(candidate)`` whose
  ``assert`` statements are the test cases (each ``assert`` counts as one test).

:func:`problem_from_record` turns a record of any supported format into a problem.
Formats and the fields we read (everything else is kept in ``metadata``):

``ragen`` (our bundled problems)
    ``id``, ``prompt``, ``tests`` (list of ``{"input", "output"}``),
    ``reference_solution``.
``humaneval`` (``openai/human-eval``, MIT)
    ``task_id``, ``prompt`` (signature + docstring), ``entry_point``,
    ``canonical_solution`` (function body), ``test`` (defines ``check``).
``apps`` (``codeparrot/apps``, MIT) and ``taco`` (``BAAI/TACO``, Apache-2.0)
    ``question``, ``input_output`` (JSON string ``{"inputs": [...], "outputs": [...],
    "fn_name"?}``), ``solutions`` (JSON string list), ``starter_code``, and the id
    ``problem_id`` (APPS) / ``name`` or ``url`` (TACO).  With ``fn_name`` the tests are
    calls: ``inputs[i]`` is the argument list and ``outputs[i]`` the result, which
    these data sets often wrap in a one-element list (we accept either, like their own
    checkers).  Otherwise ``inputs[i]`` / ``outputs[i]`` are stdin / stdout text (a
    list of lines is joined with newlines).
``livecodebench`` (``livecodebench/code_generation_lite``)
    ``question_id``, ``question_title``, ``question_content``, ``starter_code``,
    ``public_test_cases`` and ``private_test_cases`` (JSON strings of lists of
    ``{"input", "output", "testtype": "stdin" | "functional"}``; the private ones may
    be base64(zlib(pickle(JSON string))) — decoded with an unpickler that refuses every
    global, since the payload is a plain string), ``metadata`` (JSON string with
    ``func_name``).  A functional test's ``input`` holds one JSON value per line (the
    arguments) and ``output`` one JSON value; the function is a method of ``class
    Solution`` when the starter code defines one.
``mbpp`` (``google-research-datasets/mbpp``, CC-BY-4.0; Austin et al. 2021, arXiv 2108.07732)
    ``task_id``, ``text`` (the statement), ``code`` (reference solution), ``test_list``
    (``assert`` lines, shown in the prompt as in the paper's section 2.1),
    ``challenge_test_list`` (extra asserts, run but not shown), ``test_setup_code``?
    (run before the asserts); the *sanitized* subset's ``prompt`` / ``test_imports`` stand
    in for ``text`` / ``test_setup_code``.  The asserts become one :class:`CheckTest`
    (``def check(candidate)`` around them; the function is the one the first assert
    calls), so results compare with Python's ``==`` exactly as MBPP's own evaluation
    executes them — numeric across ``int`` and ``float`` (task 14 expects ``240``, a
    correct solution returns ``240.0``).
``deepcoder`` (``agentica-org/DeepCoder-Preview-Dataset``, MIT)
    ``problem``, ``tests`` (JSON string), ``starter_code``?, ``metadata``?,
    ``solutions``?.  ``tests`` is, by subset: a TACO-style dict (``taco``); a list of
    ``{"input", "output", "testtype", "metadata": {"func_name"}}`` (``lcbv5``); a list
    of ``{"input", "output", "type": "stdin_stdout" | "function_call", "fn_name"?}``
    (``primeintellect``); a list of ``{"input", "output"}`` (``codeforces``).

``auto`` picks the format from the record's keys.

Every reader keeps the split the record's source gave it (``_source_split``, set by
:mod:`ragen_envs.data.loaders` for ``test.jsonl``-style files and hub splits) in
:attr:`CodeProblem.source_split`, so ``split_mode="source"`` never serves a test
problem for training, whatever the format.
"""

from __future__ import annotations

import ast
import base64
import builtins
import hashlib
import io
import json
import pickle
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Union

from ...data.loaders import SOURCE_SPLIT_KEY
from ...jsonutil import MAX_DEPTH, NestingTooDeep, check_depth

__all__ = [
    "FORMATS",
    "CallTest",
    "CheckTest",
    "CodeProblem",
    "ProblemFormatError",
    "StdioTest",
    "detect_format",
    "is_example",
    "problem_from_record",
    "record_name",
    "without_examples",
]

FORMATS = ("auto", "ragen", "humaneval", "mbpp", "apps", "taco", "livecodebench", "deepcoder")


class ProblemFormatError(ValueError):
    """A record does not follow the format it was read as."""


@dataclass(frozen=True)
class StdioTest:
    """Run the program with ``input`` on stdin; its stdout must match ``output``."""

    input: str
    output: str


@dataclass(frozen=True)
class CallTest:
    """Call ``fn_name(*args)``; the return value must match ``expected``.

    ``accept_wrapped``: also accept a result equal to ``expected[0]`` when ``expected``
    is a one-element list (the APPS/TACO convention).
    """

    fn_name: str
    args: tuple[Any, ...]
    expected: Any
    accept_wrapped: bool = False


@dataclass(frozen=True)
class CheckTest:
    """HumanEval-style test code defining ``check(candidate)``; called with ``entry_point``.

    ``reference``: trusted code of the problem (HumanEval: the prompt plus the canonical
    body) that the checker defines before the test code, so that the names the test
    code uses besides ``candidate`` — prompt helpers such as ``poly`` or
    ``encode_cyclic``, and the entry point itself in self-referential asserts
    (HumanEval/33) — are the problem's, never the candidate's.
    Empty when the test code calls the function by name (MBPP): then those names are
    the candidate's.
    """

    code: str
    entry_point: str
    reference: str = ""


Test = Union[StdioTest, CallTest, CheckTest]


@dataclass(frozen=True)
class CodeProblem:
    """A coding problem.

    Attributes:
        id: stable identifier (``"HumanEval/0"``, ``"ragen-stdio/gcd-lcm"``, ...).
        source: the data set (``"humaneval"``, ``"ragen"``, ``"taco"``, ...).
        prompt: the statement shown to the agent.
        tests: the tests (one kind per problem in practice).
        reference_solution: a complete program / function definition that passes every
            test, when the data set has one (the oracle's answer).
        starter_code: code the answer is expected to complete, if any.
        metadata: other fields of the record.
        key_text: the text that decides the problem's split (the statement without our
            additions; equal statements from two data sets land in the same split).
        source_split: the split the record's source assigned it (``"train"``, ``"test"``,
            ...; the record's ``_source_split``), or ``None``; set by
            :func:`problem_from_record` for every format.
    """

    id: str
    source: str
    prompt: str
    tests: tuple[Test, ...]
    reference_solution: str | None = None
    starter_code: str | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    key_text: str = ""
    source_split: str | None = None

    @property
    def kind(self) -> str:
        """``"stdio"``, ``"call"`` or ``"check"`` (of the first test)."""
        first = self.tests[0] if self.tests else None
        return {StdioTest: "stdio", CallTest: "call", CheckTest: "check"}.get(type(first), "none")


def is_example(test: Test, prompt: str) -> bool:
    """A stdin/stdout test whose input and output both appear in the statement (its example).

    Both must be non-empty after stripping; matching is on the stripped text, verbatim.
    """
    if not isinstance(test, StdioTest):
        return False
    inp, out = test.input.strip(), test.output.strip()
    return bool(inp and out) and inp in prompt and out in prompt


def without_examples(problem: CodeProblem) -> CodeProblem:
    """``problem`` without the tests the statement shows (:func:`is_example`).

    A problem whose every test is shown keeps them all (else it would have no test).
    Used by DeepCoder's ``example_tests="excluded"`` (printing the shown example
    output scored 0.212 on average over our 22 stdin/stdout problems).
    """
    kept = tuple(t for t in problem.tests if not is_example(t, problem.prompt))
    return replace(problem, tests=kept) if kept and len(kept) < len(problem.tests) else problem


def _json(text: str | bytes) -> Any:
    """``json.loads`` after a depth check.

    Raises:
        ProblemFormatError: nested deeper than :data:`~ragen_envs.jsonutil.MAX_DEPTH`.
        ValueError: not JSON.
    """
    try:
        check_depth(text, MAX_DEPTH)
    except NestingTooDeep:
        raise ProblemFormatError(f"a JSON field is nested deeper than {MAX_DEPTH} levels") from None
    return json.loads(text)


def _as_json(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return _json(value)
        except ProblemFormatError:
            raise
        except ValueError:
            return value
    return value


def _text(value: Any) -> str:
    if isinstance(value, list):
        return "\n".join(str(v) for v in value)
    return "" if value is None else str(value)


def _short_id(text: str) -> str:
    return hashlib.blake2b(text.encode("utf-8"), digest_size=6).hexdigest()


def detect_format(record: Mapping[str, Any]) -> str:
    """Guess a record's format from its keys (see the module docstring).

    Raises:
        ProblemFormatError: no known format matches.
    """
    keys = set(record)
    if {"task_id", "prompt", "canonical_solution", "test", "entry_point"} <= keys:
        return "humaneval"
    if "question_content" in keys and ("public_test_cases" in keys or "private_test_cases" in keys):
        return "livecodebench"
    if "problem" in keys and "tests" in keys:
        return "deepcoder"
    if "test_list" in keys and ("text" in keys or "prompt" in keys):
        return "mbpp"
    if "question" in keys and "input_output" in keys:
        return "taco" if ({"raw_tags", "skill_types", "source", "name"} & keys) else "apps"
    if {"prompt", "tests"} <= keys:
        return "ragen"
    raise ProblemFormatError(f"cannot tell the format of a record with keys {sorted(keys)}")


_ID_KEYS = ("question_id", "task_id", "problem_id", "id", "name", "url")


def record_name(record: Mapping[str, Any]) -> str:
    """A short name for a record in messages: its first id field, else ``"(no id)"``."""
    for key in _ID_KEYS:
        value = record.get(key)
        if value not in (None, ""):
            return repr(str(value)[:80])
    return "(no id)"


def problem_from_record(record: Mapping[str, Any], fmt: str = "auto") -> CodeProblem:
    """Convert one data set record into a :class:`CodeProblem`.

    Raises:
        ProblemFormatError: the record lacks a field its format needs, has a field of
            the wrong shape, or has no test; the message names the record
            (:func:`record_name`).
    """
    fmt = detect_format(record) if fmt == "auto" else fmt
    reader = _READERS.get(fmt)
    if reader is None:
        raise ProblemFormatError(
            f"unknown code problem format {fmt!r}; known: {', '.join(FORMATS)}"
        )
    try:
        problem = reader(record)
    except ProblemFormatError as exc:
        raise ProblemFormatError(f"{fmt} record {record_name(record)}: {exc}") from None
    except (KeyError, TypeError, ValueError, AttributeError, RecursionError) as exc:
        raise ProblemFormatError(
            f"{fmt} record {record_name(record)}: {type(exc).__name__}: {exc}"
        ) from None
    if not problem.tests:
        raise ProblemFormatError(f"{fmt} record {problem.id!r} has no test")
    split = record.get(SOURCE_SPLIT_KEY)
    return replace(problem, source_split=str(split)) if split not in (None, "") else problem


# ------------------------------------------------------------------- readers
def _read_ragen(r: Mapping[str, Any]) -> CodeProblem:
    tests = tuple(StdioTest(_text(t["input"]), _text(t["output"])) for t in r["tests"])
    return CodeProblem(
        str(r["id"]),
        str(r.get("source", "ragen")),
        str(r["prompt"]),
        tests,
        r.get("reference_solution"),
        r.get("starter_code"),
        {k: v for k, v in r.items() if k not in ("id", "prompt", "tests", "reference_solution")},
        str(r["prompt"]),
    )


def _read_humaneval(r: Mapping[str, Any]) -> CodeProblem:
    entry = str(r["entry_point"])
    prompt = (
        f"Complete the Python function `{entry}` below. Answer with the complete function definition "
        f"(the `def {entry}` line, its body and any imports or helper functions it needs).\n\n"
        f"```python\n{r['prompt']}```"
    )
    return CodeProblem(
        str(r["task_id"]),
        "humaneval",
        prompt,
        (CheckTest(str(r["test"]), entry, str(r["prompt"]) + str(r["canonical_solution"])),),
        str(r["prompt"]) + str(r["canonical_solution"]),
        str(r["prompt"]),
        {"entry_point": entry},
        str(r["prompt"]),
    )


def _mbpp_entry_point(asserts: Sequence[str], code: Any) -> str:
    """The function the first assert calls (else the first ``def`` of the reference code)."""
    for line in asserts:
        for node in ast.walk(ast.parse(line)):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id not in dir(builtins)
            ):
                return node.func.id
    if isinstance(code, str):
        for node in ast.parse(code).body:
            if isinstance(node, ast.FunctionDef):
                return node.name
    raise ProblemFormatError("cannot tell which function the MBPP asserts test")


def _read_mbpp(r: Mapping[str, Any]) -> CodeProblem:
    text = str(r["text"] if "text" in r else r["prompt"])
    for name in ("test_list", "challenge_test_list"):
        value = r.get(name) or []
        if not isinstance(value, list) or not all(isinstance(a, str) for a in value):
            raise ProblemFormatError(
                f"mbpp record {r.get('task_id')!r}: {name} must be a list of assert strings"
            )
    shown = [a.strip() for a in r["test_list"] if a.strip()]
    hidden = [a.strip() for a in r.get("challenge_test_list") or [] if a.strip()]
    setup = r.get("test_setup_code") or "\n".join(str(x) for x in r.get("test_imports") or [])
    try:
        entry = _mbpp_entry_point(shown + hidden, r.get("code"))
        body = (
            "".join("    " + line + "\n" for a in shown + hidden for line in a.splitlines())
            or "    pass\n"
        )
        check = f"{setup}\n\ndef check(candidate):\n{body}"
        ast.parse(check)
    except SyntaxError as exc:
        raise ProblemFormatError(
            f"mbpp record {r.get('task_id')!r}: a test does not parse: {exc}"
        ) from None
    tests_text = "\n".join(shown)
    prompt = (
        f"{text}\n\nYour code should pass these tests:\n\n```python\n{tests_text}\n```\n\n"
        f"Answer with the complete Python function `{entry}` (and any imports or helpers it needs)."
    )
    ident = str(r.get("task_id") if r.get("task_id") not in (None, "") else _short_id(text))
    meta = {
        k: v
        for k, v in r.items()
        if k not in ("text", "prompt", "code", "test_list", "challenge_test_list")
    }
    return CodeProblem(
        f"mbpp/{ident}",
        "mbpp",
        prompt,
        (CheckTest(check, entry),),
        str(r["code"]) if r.get("code") else None,
        None,
        {**meta, "entry_point": entry},
        text,
    )


def _taco_like_tests(io_spec: Any) -> tuple[Test, ...]:
    spec = _as_json(io_spec)
    if not isinstance(spec, Mapping):
        raise ProblemFormatError("input_output is not an object")
    inputs, outputs = list(spec.get("inputs", [])), list(spec.get("outputs", []))
    if len(inputs) != len(outputs):
        raise ProblemFormatError(f"{len(inputs)} inputs but {len(outputs)} outputs")
    fn = spec.get("fn_name")
    if fn:
        return tuple(
            CallTest(
                str(fn),
                tuple(_as_json(i) if isinstance(_as_json(i), list) else [_as_json(i)]),
                _as_json(o),
                accept_wrapped=True,
            )
            for i, o in zip(inputs, outputs)
        )
    return tuple(StdioTest(_text(i), _text(o)) for i, o in zip(inputs, outputs))


def _first_solution(solutions: Any) -> str | None:
    sols = _as_json(solutions)
    if isinstance(sols, list) and sols and isinstance(sols[0], str):
        return sols[0]
    return None


def _read_apps(r: Mapping[str, Any], source: str = "apps") -> CodeProblem:
    tests = _taco_like_tests(r["input_output"])
    ident = r.get("problem_id", r.get("name", r.get("url")))
    ident = str(ident) if ident not in (None, "") else _short_id(str(r["question"]))
    starter = r.get("starter_code") or None
    prompt = str(r["question"])
    if starter:
        prompt += f"\n\nUse this starter code:\n```python\n{starter}\n```"
    return CodeProblem(
        f"{source}/{ident}",
        source,
        prompt,
        tests,
        _first_solution(r.get("solutions")),
        starter,
        {k: v for k, v in r.items() if k not in ("question", "input_output", "solutions")},
        str(r["question"]),
    )


def _read_taco(r: Mapping[str, Any]) -> CodeProblem:
    return _read_apps(r, "taco")


#: Largest decoded size of one record's LiveCodeBench test cases (bytes).  The zlib
#: layer is decompressed with this bound, so a 1.4 MB "zlib bomb" that expands to 1 GiB
#: is refused after 256 MiB instead of taking 2 GB of memory.
MAX_LCB_TESTS_BYTES = 256 << 20


def _bounded_decompress(data: bytes, limit: int) -> bytes:
    """zlib-decompress ``data`` to at most ``limit`` bytes.

    Raises:
        ProblemFormatError: the data decompresses to more than ``limit`` bytes.
    """
    d = zlib.decompressobj()
    raw = d.decompress(data, limit + 1)
    if len(raw) > limit or d.unconsumed_tail:
        raise ProblemFormatError(
            f"LiveCodeBench test cases decompress to more than {limit >> 20} MiB "
            "(MAX_LCB_TESTS_BYTES); refusing the record"
        )
    return raw


class _StringOnlyUnpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:  # noqa: D102 - refuses everything
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name} from test data")


#: The fields of a LiveCodeBench test case that are read; everything else is dropped.
_LCB_TEXT_FIELDS = ("input", "output")
_LCB_NAME_FIELDS = ("testtype", "type", "fn_name")


def _flat_text(value: Any, what: str) -> tuple[str | list[str], int]:
    """``value`` if it is a ``str`` or a flat list of ``str``, with its length in characters.

    Checked on types and lengths only: nothing is stringified (a pickle of shared nested
    lists is a few hundred bytes and would print as terabytes).

    Raises:
        ProblemFormatError: any other type (named).
    """
    if isinstance(value, str):
        return value, len(value)
    if isinstance(value, list):
        bad = next((v for v in value if not isinstance(v, str)), None)
        if bad is None:
            return list(value), sum(map(len, value))
        raise ProblemFormatError(
            f"LiveCodeBench test case {what} is a list holding a {type(bad).__name__}, "
            "not only strings"
        )
    raise ProblemFormatError(
        f"LiveCodeBench test case {what} is a {type(value).__name__}, not a string"
    )


def _clean_lcb_cases(data: Any, limit: int) -> list[dict[str, Any]]:
    """The decoded cases rebuilt from checked parts (:func:`decode_lcb_tests`).

    Raises:
        ProblemFormatError: not a list of objects, a field of another type, or more than
            ``limit`` characters of text in all.
    """
    if not isinstance(data, list):
        raise ProblemFormatError("LiveCodeBench test cases are not a list")
    cases: list[dict[str, Any]] = []
    total = 0
    for c in data:
        if not isinstance(c, Mapping):
            raise ProblemFormatError(
                f"LiveCodeBench test cases hold a {type(c).__name__}, not an object"
            )
        case: dict[str, Any] = {}
        for key in _LCB_TEXT_FIELDS:
            if key in c:
                case[key], size = _flat_text(c[key], repr(key))
                total += size
        meta = c.get("metadata")
        names = {k: c.get(k) for k in _LCB_NAME_FIELDS}
        if isinstance(meta, Mapping):
            names["metadata.func_name"] = meta.get("func_name")
        for key, name in names.items():
            if name is None:
                continue
            if not isinstance(name, str):
                raise ProblemFormatError(
                    f"LiveCodeBench test case {key!r} is a {type(name).__name__}, not a string"
                )
            total += len(name)
            if key == "metadata.func_name":
                case["metadata"] = {"func_name": name}
            else:
                case[key] = name
        if total > limit:
            raise ProblemFormatError(
                f"LiveCodeBench test cases hold more than {limit >> 20} MiB of text "
                "(MAX_LCB_TESTS_BYTES); refusing the record"
            )
        cases.append(case)
    return cases


def decode_lcb_tests(value: Any) -> list[dict[str, Any]]:
    """Decode LiveCodeBench test cases: JSON text, or base64(zlib(pickle(JSON text))).

    The pickle payload is read with an unpickler that refuses any global, so a crafted
    file cannot run code; only plain strings/containers decode.  The zlib layer is
    decompressed to at most :data:`MAX_LCB_TESTS_BYTES`, JSON is depth-checked
    (:data:`~ragen_envs.jsonutil.MAX_DEPTH`) before parsing, and the result is accepted
    only as a list of objects whose ``input`` / ``output`` are ``str`` or flat lists of
    ``str`` (and ``testtype`` / ``fn_name`` / ``metadata.func_name`` ``str``), at most
    :data:`MAX_LCB_TESTS_BYTES` characters of text in all — checked on types and
    lengths before anything is stringified, since a pickle's shared references make a
    534-byte payload of nested lists that prints as terabytes.  Other fields of a case
    are dropped.

    Raises:
        ProblemFormatError: neither encoding applies, the data is larger than the bound,
            nested too deeply, or not of those types.
    """
    if value is None or value == "":
        return []
    if isinstance(value, list):
        return _clean_lcb_cases(value, MAX_LCB_TESTS_BYTES)
    if not isinstance(value, str):
        raise ProblemFormatError(
            f"LiveCodeBench test cases are a {type(value).__name__}, not a string"
        )
    try:
        data = _json(value)
    except ProblemFormatError:
        raise
    except ValueError:
        try:
            raw = _bounded_decompress(base64.b64decode(value), MAX_LCB_TESTS_BYTES)
            data = _StringOnlyUnpickler(io.BytesIO(raw)).load()
            if isinstance(data, (bytes, str)):
                data = _json(data)
        except ProblemFormatError:
            raise
        except Exception as exc:  # noqa: BLE001 - any decoding failure
            raise ProblemFormatError(
                f"cannot decode LiveCodeBench test cases: {type(exc).__name__}: {exc}"
            ) from None
    return _clean_lcb_cases(data, MAX_LCB_TESTS_BYTES)


def _lcb_call_args(text: str) -> tuple[Any, ...]:
    return tuple(_json(line) for line in str(text).split("\n") if line.strip())


def _lcb_tests(cases: Sequence[Mapping[str, Any]], func_name: str | None) -> tuple[Test, ...]:
    tests: list[Test] = []
    for c in cases:
        ttype = c.get("testtype") or c.get("type")
        meta = c.get("metadata") or {}
        fn = (
            func_name
            or (meta.get("func_name") if isinstance(meta, Mapping) else None)
            or c.get("fn_name")
        )
        if ttype in ("functional", "function_call"):
            if not fn:
                raise ProblemFormatError("functional test without a function name")
            inp = c["input"]
            args = _lcb_call_args(inp) if isinstance(inp, str) else tuple(inp)
            out = c["output"]
            tests.append(
                CallTest(str(fn), args, _as_json(out), accept_wrapped=ttype == "function_call")
            )
        else:
            tests.append(StdioTest(_text(c["input"]), _text(c["output"])))
    return tuple(tests)


def _read_lcb(r: Mapping[str, Any]) -> CodeProblem:
    meta = _as_json(r.get("metadata") or "{}")
    fn = meta.get("func_name") if isinstance(meta, Mapping) else None
    cases = decode_lcb_tests(r.get("public_test_cases")) + decode_lcb_tests(
        r.get("private_test_cases")
    )
    starter = r.get("starter_code") or None
    prompt = str(r.get("question_title", "")).strip()
    prompt = (prompt + "\n\n" if prompt else "") + str(r["question_content"])
    if starter:
        prompt += f"\n\nUse this starter code:\n```python\n{starter}\n```"
    ident = str(r.get("question_id") or _short_id(str(r["question_content"])))
    return CodeProblem(
        f"livecodebench/{ident}",
        "livecodebench",
        prompt,
        _lcb_tests(cases, fn),
        None,
        starter,
        {k: v for k, v in r.items() if k not in ("public_test_cases", "private_test_cases")},
        str(r["question_content"]),
    )


def _read_deepcoder(r: Mapping[str, Any]) -> CodeProblem:
    tests_raw = _as_json(r["tests"])
    meta = _as_json(r.get("metadata") or "{}")
    fn = meta.get("func_name") if isinstance(meta, Mapping) else None
    if isinstance(tests_raw, Mapping):
        tests = _taco_like_tests(tests_raw)
    elif isinstance(tests_raw, list):
        tests = _lcb_tests(tests_raw, fn)
    else:
        raise ProblemFormatError("tests is neither a list nor an object")
    starter = r.get("starter_code") or None
    prompt = str(r["problem"])
    if starter:
        prompt += f"\n\nUse this starter code:\n```python\n{starter}\n```"
    ident = str(r.get("id") or r.get("problem_id") or _short_id(prompt))
    return CodeProblem(
        f"deepcoder/{ident}",
        "deepcoder",
        prompt,
        tests,
        _first_solution(r.get("solutions")),
        starter,
        {k: v for k, v in r.items() if k not in ("problem", "tests", "solutions")},
        str(r["problem"]),
    )


_READERS = {
    "ragen": _read_ragen,
    "humaneval": _read_humaneval,
    "mbpp": _read_mbpp,
    "apps": _read_apps,
    "taco": _read_taco,
    "livecodebench": _read_lcb,
    "deepcoder": _read_deepcoder,
}
