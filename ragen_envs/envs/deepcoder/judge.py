"""Run a candidate program against a problem's tests in the sandbox and score it.

Spec: ``docs/envs/deepcoder.md``.  Every program runs through :mod:`ragen_envs.sandbox`
(one sandboxed run per stdin/stdout or call test; one per HumanEval ``check``).  Call and
``check`` tests are judged by a harness outside the candidate (:mod:`.harness`): the
verdict comes back on a channel the candidate cannot write to, as plain data.

**Code extraction** (:func:`extract_code`): the last fenced block labelled ``python``,
``py``, ``python3`` or unlabelled (``` fences are optional); if there is only a block
in another language, the last block; with no fence, the whole answer.  An unclosed
final fence (a truncated answer) runs to the end of the text.

**Output comparison** (:func:`outputs_match`): stdout and the expected output are split
into whitespace-separated tokens (so line breaks and repeated spaces do not matter);
tokens must be equal, except for numbers: an expected **integer** literal matches only
a token of exactly that value (``240`` or ``240.0``, never ``240.0000001`` — a float
tolerance on integers let a wrong 13-digit answer pass); an expected
non-integer may differ by ``tol * max(1, |expected|)`` (absolute or relative error
``tol``, default ``1e-6`` — the usual judge rule).  Call results (:func:`values_match`)
are compared structurally: equal types up to list/tuple, numbers by the same rule
(bools are not numbers), dict keys exactly; a result of a subclass of a built-in type, a
``Fraction`` or a ``Decimal`` is first turned into its plain value in the candidate's
process (:data:`~.harness.PLAIN_RESULTS`), as Python's ``==`` would compare it.
"""

from __future__ import annotations

import ast
import math
import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from decimal import Decimal, InvalidOperation
from typing import Any

from ...sandbox import SandboxConfig, SandboxResult, SandboxStatus, run_python
from .harness import call_harness, check_harness, with_plain_results
from .problems import CallTest, CheckTest, CodeProblem, StdioTest

__all__ = [
    "JudgeReport",
    "SandboxFailure",
    "TestOutcome",
    "extract_code",
    "judge",
    "outputs_match",
    "reference_passes",
    "tests_count",
    "values_match",
]

_LANG = re.compile(r"[ \t]*([A-Za-z0-9_+#.-]*)")
_PY_LANGS = {"", "python", "py", "python3", "py3"}
_INT = re.compile(r"^[-+]?\d+$")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """``(language, code)`` of every fenced block, in order, in one left-to-right pass.

    A block opens at a ```` ``` ```` that has a line break somewhere after it: the rest
    of that line is its info string, whose first word (after spaces or tabs, made of
    ``[A-Za-z0-9_+#.-]``) is the language; the code runs from the next line to the
    next ```` ``` ```` (or to the end of the text, for an unclosed final fence), and the
    search for the next block continues after that closing fence.  Each character is
    looked at a bounded number of times (``str.find`` from a position that only moves
    forward), so the cost is linear in ``len(text)`` — a regular expression with a lazy
    body and a per-position scan for the line break took quadratic time on inputs like
    ``"```" * 200000``.
    """
    blocks: list[tuple[str, str]] = []
    pos, n = 0, len(text)
    while pos < n:
        start = text.find("```", pos)
        if start < 0:
            break
        eol = text.find("\n", start + 3)
        if eol < 0:
            break  # no line break after this fence, so none after any later one either
        found = _LANG.match(text, start + 3, eol)
        assert found is not None  # the pattern matches the empty string
        lang = found.group(1)
        end = text.find("```", eol + 1)
        if end < 0:
            blocks.append((lang, text[eol + 1 :]))
            break
        blocks.append((lang, text[eol + 1 : end]))
        pos = end + 3
    return blocks


def extract_code(answer: str) -> str | None:
    """The program in an answer (rules in the module docstring); ``None`` if empty.

    Runs in time linear in ``len(answer)`` (:func:`_fenced_blocks`); the env caps the
    action length before this is called (``ragen_envs.core.MAX_ACTION_LENGTH``).
    """
    if not isinstance(answer, str):
        return None
    blocks = [(lang.lower(), code) for lang, code in _fenced_blocks(answer)]
    if blocks:
        py = [code for lang, code in blocks if lang in _PY_LANGS]
        code = (py or [blocks[-1][1]])[-1]
    else:
        code = answer
    code = code.strip("\n")
    return code if code.strip() else None


def _num(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value


def _same_integer(token: str, expected: int) -> bool:
    """``token`` is a number literal of exactly the value ``expected`` (``"240.0"`` for 240)."""
    if len(token) > 4300 or "_" in token:  # past int's default digit limit; "1_000" is no number
        return False
    try:
        value = Decimal(token)
    except (InvalidOperation, ValueError):
        return False
    return value.is_finite() and value == expected


def outputs_match(got: str, expected: str, tol: float = 1e-6) -> bool:
    """Token-wise comparison of program output with the expected output (module docstring)."""
    a, b = got.split(), expected.split()
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        if _INT.match(y):
            if _INT.match(x) or len(y) > 4300 or not _same_integer(x, int(y)):
                return False
            continue
        fx, fy = _num(x), _num(y)
        if fx is None or fy is None or not (math.isfinite(fx) and math.isfinite(fy)):
            return False
        if abs(fx - fy) > tol * max(1.0, abs(fy)):
            return False
    return True


def values_match(got: Any, expected: Any, tol: float = 1e-6) -> bool:
    """Structural comparison of a call result with the expected value (module docstring)."""
    if isinstance(got, bool) or isinstance(expected, bool):
        return type(got) is type(expected) and got == expected
    if isinstance(got, (int, float)) and isinstance(expected, (int, float)):
        if isinstance(expected, int):
            return got == expected  # exact, also for a float result (Python compares exactly)
        if not (math.isfinite(got) and math.isfinite(expected)):
            return got == expected
        return abs(got - expected) <= tol * max(1.0, abs(expected))
    if isinstance(got, (list, tuple)) and isinstance(expected, (list, tuple)):
        return len(got) == len(expected) and all(
            values_match(g, e, tol) for g, e in zip(got, expected)
        )
    if isinstance(got, dict) and isinstance(expected, dict):
        return got.keys() == expected.keys() and all(
            values_match(got[k], expected[k], tol) for k in got
        )
    return got == expected


class SandboxFailure(RuntimeError):
    """The sandbox itself failed (``sandbox_error``): an infrastructure fault, not the
    candidate's, so it is raised rather than scored (the agent loop records ``env_error``)."""


def _check_sandbox(res: SandboxResult) -> SandboxResult:
    if res.status is SandboxStatus.SANDBOX_ERROR:
        raise SandboxFailure(f"the sandbox failed: {res.detail}; stderr: {res.stderr[-500:]!r}")
    return res


@dataclass(frozen=True)
class TestOutcome:
    """The result of one test.

    Attributes:
        index: test number (from 0).
        passed: the test passed.
        status: ``passed``, ``wrong_answer``, ``not_run``, ``syntax_error`` or a
            :class:`~ragen_envs.sandbox.SandboxStatus` value (``runtime_error``,
            ``timeout``, ...).
        feedback: a short description for the agent (input, expected, got, error),
            each part truncated.
    """

    index: int
    passed: bool
    status: str
    feedback: str = ""


@dataclass(frozen=True)
class JudgeReport:
    """Scores of one candidate on one problem.

    Attributes:
        outcomes: one per test, in order.
        syntax_error: the parser's message when the candidate does not parse (then no
            test ran), else ``None``.
    """

    outcomes: tuple[TestOutcome, ...]
    syntax_error: str | None = None

    @property
    def total(self) -> int:
        """Number of tests."""
        return len(self.outcomes)

    @property
    def passed(self) -> int:
        """Tests passed."""
        return sum(o.passed for o in self.outcomes)

    @property
    def pass_rate(self) -> float:
        """``passed / total`` (0 for a problem without tests)."""
        return self.passed / self.total if self.total else 0.0

    @property
    def all_passed(self) -> bool:
        """Every test passed."""
        return self.total > 0 and self.passed == self.total

    @property
    def first_failure(self) -> TestOutcome | None:
        """The first failed test, if any."""
        return next((o for o in self.outcomes if not o.passed), None)


def _cut(text: str, n: int) -> str:
    text = str(text)
    return text if len(text) <= n else text[:n] + f"... [{len(text) - n} more characters]"


def _error_tail(res: SandboxResult, n: int) -> str:
    lines = [ln for ln in res.stderr.strip().splitlines() if ln.strip()]
    return _cut(lines[-1], n) if lines else res.detail


def _status_text(res: SandboxResult, n: int = 300) -> str:
    if res.status is SandboxStatus.TIMEOUT:
        return f"time limit exceeded ({res.detail} time)"
    return f"{res.status.value.replace('_', ' ')}: {_error_tail(res, n)}"


def _run_stdio(
    code: str, test: StdioTest, index: int, cfg: SandboxConfig, tol: float, n: int
) -> TestOutcome:
    res = _check_sandbox(run_python(code, stdin=test.input, config=cfg))
    head = f"Input:\n{_cut(test.input, n)}\nExpected output:\n{_cut(test.output, n)}"
    if res.status is SandboxStatus.OK:
        if outputs_match(res.stdout, test.output, tol):
            return TestOutcome(index, True, "passed")
        return TestOutcome(
            index, False, "wrong_answer", f"{head}\nYour output:\n{_cut(res.stdout, n)}"
        )
    return TestOutcome(
        index, False, res.status.value, f"{head}\nYour program failed: {_status_text(res, n)}"
    )


def _show(value: Any) -> str:
    """``repr`` for feedback; never raises (e.g. an int too long to print in decimal)."""
    try:
        return repr(value)
    except Exception:  # noqa: BLE001 - ValueError (int digits), RecursionError, ...
        return f"<{type(value).__name__} too large to show>"


def _run_call(
    code: str, test: CallTest, index: int, cfg: SandboxConfig, tol: float, n: int
) -> TestOutcome:
    res = _check_sandbox(
        run_python(
            with_plain_results(code), config=cfg, harness=call_harness(test.fn_name, test.args)
        )
    )
    args = ", ".join(_show(a) for a in test.args)
    head = f"Call: {test.fn_name}({_cut(args, n)})\nExpected: {_cut(_show(test.expected), n)}"
    verdict = [
        v
        for v in res.verdict
        if type(v) is tuple and len(v) == 2 and v[0] in ("value", "repr", "raise")
    ]
    if res.status is SandboxStatus.OK and verdict:
        kind, got = verdict[-1]
        if kind == "raise":
            return TestOutcome(
                index,
                False,
                "runtime_error",
                f"{head}\nYour code failed: runtime error: {_cut(str(got), n)}",
            )
        text = got if kind == "repr" else _show(got)
        # A result that is not plain data never equals the (plain) expected value, even
        # when its repr text does (an object whose repr is the expected string).
        ok = kind == "value" and values_match(got, test.expected, tol)
        if (
            kind == "value"
            and not ok
            and test.accept_wrapped
            and isinstance(test.expected, list)
            and len(test.expected) == 1
        ):
            ok = values_match(got, test.expected[0], tol)
        if ok:
            return TestOutcome(index, True, "passed")
        return TestOutcome(index, False, "wrong_answer", f"{head}\nGot: {_cut(text, n)}")
    status = res.status.value if res.status is not SandboxStatus.OK else "runtime_error"
    return TestOutcome(index, False, status, f"{head}\nYour code failed: {_status_text(res, n)}")


def _run_check(
    code: str, test: CheckTest, first_index: int, cfg: SandboxConfig, n: int
) -> list[TestOutcome]:
    harness, count = check_harness(test.code, test.entry_point, test.reference)
    res = _check_sandbox(run_python(with_plain_results(code), config=cfg, harness=harness))
    state: dict[int, tuple[bool, str]] = {}
    for entry in res.verdict:
        if not (
            type(entry) is tuple
            and len(entry) == 3
            and type(entry[0]) is int
            and type(entry[1]) is bool
        ):
            continue
        idx, ok, detail = entry
        if not 0 <= idx < count:
            continue
        prev = state.get(idx)
        if prev is None or (prev[0] and not ok):
            state[idx] = (ok if prev is None else prev[0] and ok, str(detail))
    outcomes = []
    for i in range(count):
        if i in state:
            ok, detail = state[i]
            outcomes.append(
                TestOutcome(
                    first_index + i,
                    ok,
                    "passed" if ok else "wrong_answer",
                    "" if ok else _cut(detail, 2 * n),
                )
            )
        else:
            why = (
                _status_text(res, n)
                if res.status is not SandboxStatus.OK
                else f"not reached: {_error_tail(res, n)}"
            )
            outcomes.append(
                TestOutcome(
                    first_index + i,
                    False,
                    res.status.value if res.status is not SandboxStatus.OK else "not_run",
                    f"assert {i} did not run ({why})",
                )
            )
    return outcomes


class _Budget:
    """The wall-clock budget of one judging (``None`` seconds: unbounded), thread-safe to read."""

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        self.deadline = None if seconds is None else time.monotonic() + float(seconds)

    def config(self, cfg: SandboxConfig) -> SandboxConfig | None:
        """``cfg`` with its wall limit cut to the time left; ``None`` when none is left."""
        if self.deadline is None:
            return cfg
        left = self.deadline - time.monotonic()
        if left <= 0.05:
            return None
        return cfg if left >= cfg.wall_time_s else replace(cfg, wall_time_s=left)

    def spent(self, index: int) -> TestOutcome:
        """The outcome of a test that did not run because the budget was spent."""
        return TestOutcome(
            index, False, "not_run", f"not run: the step's time budget ({self.seconds:g} s) ran out"
        )


def judge(
    code: str,
    problem: CodeProblem,
    *,
    sandbox: SandboxConfig | None = None,
    tol: float = 1e-6,
    max_tests: int | None = None,
    stop_on_first_failure: bool = False,
    workers: int = 1,
    feedback_chars: int = 300,
    time_budget_s: float | None = None,
) -> JudgeReport:
    """Run ``code`` on ``problem``'s tests; each program runs in the sandbox.

    Args:
        code: the candidate program / function definitions.
        problem: the problem.
        sandbox: limits per sandboxed run (default :class:`SandboxConfig()`).
        tol: numeric tolerance of output comparison.
        max_tests: run only the first ``max_tests`` stdin/call tests (``None``: all).
        stop_on_first_failure: skip the remaining tests after a failure (they count
            as failed, status ``not_run``).
        workers: stdin/call tests run in this many threads at once.
        feedback_chars: truncation length of each part of the feedback text.
        time_budget_s: wall-clock seconds for all the runs together (``None``: no cap
            beyond each run's own limit).  Each run's wall limit is cut to the time
            left, and a test that would start after the budget is spent fails as
            ``not_run``; so a correct program followed by ``sleep`` costs at most the
            budget, not tests x wall limit.

    Returns:
        A :class:`JudgeReport`.  A candidate that does not parse fails every test
        without running (``syntax_error`` set).

    Raises:
        SandboxFailure: a run ended in ``sandbox_error`` (the sandbox could not be set
            up); no score is given for an infrastructure fault.
    """
    cfg = sandbox or SandboxConfig()
    tests = list(problem.tests)
    try:
        ast.parse(code)
    except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
        msg = f"{type(exc).__name__}: {exc}"
        n_total = tests_count(problem, max_tests)
        return JudgeReport(
            tuple(TestOutcome(i, False, "syntax_error", msg) for i in range(n_total)), msg
        )
    outcomes: list[TestOutcome] = []
    simple = [t for t in tests if not isinstance(t, CheckTest)]
    if max_tests is not None:
        simple = simple[:max_tests]
    checks = [t for t in tests if isinstance(t, CheckTest)]
    budget = _Budget(time_budget_s)
    for t in checks:
        run_cfg = budget.config(cfg)
        if run_cfg is None:
            first = len(outcomes)
            outcomes.extend(budget.spent(first + j) for j in range(_count(t)))
            continue
        outcomes.extend(_run_check(code, t, len(outcomes), run_cfg, feedback_chars))

    def run_one(i: int) -> TestOutcome:
        t = simple[i]
        idx = len(outcomes) + i
        run_cfg = budget.config(cfg)
        if run_cfg is None:
            return budget.spent(idx)
        if isinstance(t, StdioTest):
            return _run_stdio(code, t, idx, run_cfg, tol, feedback_chars)
        return _run_call(code, t, idx, run_cfg, tol, feedback_chars)

    if stop_on_first_failure or workers <= 1:
        failed = any(not o.passed for o in outcomes) and stop_on_first_failure
        results = []
        for i in range(len(simple)):
            if failed:
                results.append(
                    TestOutcome(len(outcomes) + i, False, "not_run", "skipped after a failure")
                )
                continue
            r = run_one(i)
            results.append(r)
            failed = stop_on_first_failure and not r.passed
    else:
        with ThreadPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(run_one, range(len(simple))))
    outcomes.extend(results)
    return JudgeReport(tuple(outcomes))


def _count(test: Any) -> int:
    if isinstance(test, CheckTest):
        from .harness import count_asserts

        return count_asserts(test.code)
    return 1


def tests_count(problem: CodeProblem, max_tests: int | None = None) -> int:
    """Number of scored tests of a problem (asserts of a ``check`` count one each)."""
    simple = [t for t in problem.tests if not isinstance(t, CheckTest)]
    if max_tests is not None:
        simple = simple[:max_tests]
    return len(simple) + sum(_count(t) for t in problem.tests if isinstance(t, CheckTest))


def reference_passes(problem: CodeProblem, **kwargs: Any) -> JudgeReport:
    """Judge the problem's reference solution (raises ``ValueError`` if it has none)."""
    if not problem.reference_solution:
        raise ValueError(f"problem {problem.id} has no reference solution")
    return judge(problem.reference_solution, problem, **kwargs)
