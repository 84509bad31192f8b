"""DeepCoder: write a program that passes a problem's tests (spec: ``docs/envs/deepcoder.md``).

The observation is the problem statement; the action is the agent's answer, from which
the program is extracted (``ragen_envs.envs.deepcoder.judge.extract_code``: a ```python fence is
optional).  The program runs against every test **in the sandbox**
(:mod:`ragen_envs.sandbox`: CPU, memory, file-size, process and output limits, no
network, a private temporary directory); the reward of attempt ``k`` follows
:class:`ragen_envs.data.attempts.AttemptTracker` with score ``passed / total`` (so with
one attempt, reward = pass rate as in RAGEN), success = all tests passed, and a
failed attempt's observation shows the first failing test (input, expected, got,
error; truncated) while attempts remain.

Differences from RAGEN (RAGEN-AI/RAGEN ragen/env/, weaknesses 6 and 10): RAGEN
runs model code in a plain subprocess with a 3 s timeout and no other limit, and its
default split is the test split it also trains on; here every program is contained,
and train / validation / test are disjoint by the normalised problem statement, with
``train`` the default split.
"""

from __future__ import annotations

import ast
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ...core import Transition, join_lines
from ...data.attempts import AttemptTracker, attempts_rule
from ...data.loaders import DataSourceError, load_source, skipped_lines
from ...data.splits import canonical_key
from ...dataset_env import DatasetEnv
from ...sandbox import SandboxConfig, sandbox_level
from .judge import extract_code, judge, tests_count
from .problems import (
    CallTest,
    CheckTest,
    CodeProblem,
    ProblemFormatError,
    problem_from_record,
    without_examples,
)

__all__ = ["DeepCoderEnv"]


class DeepCoderEnv(DatasetEnv):
    """Programming problems judged by sandboxed tests.

    Config (``ragen_envs/envs/deepcoder/config.schema.json``): ``split``, ``split_mode``,
    ``data_source`` (a source spec or a list of them), ``data_format``,
    ``max_attempts`` (1), ``attempt_decay`` (0.5), ``time_limit_s`` (CPU seconds per
    test run), ``wall_time_limit_s``, ``step_time_budget_s`` (wall seconds for all of
    a step's runs), ``memory_limit_mb``, ``float_tolerance``,
    ``max_tests``, ``stop_on_first_failure``, ``parallel_tests``, ``example_tests``
    (``scored``, or ``excluded``: the strict variant, tests shown in the statement are
    not scored — :func:`.problems.without_examples`),
    ``sandbox_namespaces``, ``feedback_chars``, ``max_code_chars``, ``max_steps`` (3, >=
    ``max_attempts``), ``invalid_action_reward``.

    Malformed data records are skipped with one warning naming them (the messages are
    kept in :attr:`skipped_records`).

    Invalid actions (state unchanged, ``invalid_action_reward``, no attempt used, the
    reason in ``info["invalid_reason"]``): no code, code longer than
    ``max_code_chars``, or code that does not parse as Python 3.

    Raises:
        ConfigError: ``max_steps < max_attempts``.
    """

    env_key = "deepcoder"
    #: Messages naming the malformed records the last load skipped.
    skipped_records: tuple[str, ...] = ()

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        c = self.config
        self._tracker = AttemptTracker.from_config(self.env_key, c)
        self._sandbox = SandboxConfig(
            cpu_time_s=float(c["time_limit_s"]),
            wall_time_s=float(c["wall_time_limit_s"]),
            memory_mb=int(c["memory_limit_mb"]),
            namespaces=c["sandbox_namespaces"],
        )
        self._feedback: str | None = None

    # ------------------------------------------------------------- data hooks
    def _sources(self) -> list[str]:
        src = self.config["data_source"]
        return [src] if isinstance(src, str) else list(src)

    def _load_items(self) -> Sequence[CodeProblem]:
        problems = []
        skipped: list[str] = []
        for spec in self._sources():
            records = load_source(spec)
            skipped.extend(skipped_lines(spec))  # lines too deep to read, named file:line
            for rec in records:
                try:
                    problems.append(problem_from_record(rec, self.config["data_format"]))
                except ProblemFormatError as exc:
                    skipped.append(str(exc))  # a malformed record is skipped, and named
        self.skipped_records = tuple(skipped)
        if skipped:
            shown = "; ".join(skipped[:5]) + (
                f"; ... {len(skipped) - 5} more" if len(skipped) > 5 else ""
            )
            warnings.warn(
                f"deepcoder: skipped {len(skipped)} malformed record(s): {shown}", stacklevel=2
            )
        if not problems:
            raise DataSourceError(f"no usable coding problem in {self._sources()}")
        return problems

    def _item_key(self, item: CodeProblem) -> str:
        return canonical_key(item.key_text or item.prompt)

    def _start_item(self, item: CodeProblem, options: Mapping[str, Any]) -> None:
        self._tracker.reset()
        self._feedback = None
        excluded = self.config["example_tests"] == "excluded"
        self._scored = without_examples(item) if excluded else item

    # ------------------------------------------------------------------ API
    def _step(self, action: str) -> Transition:
        code = extract_code(action)
        if code is None:
            return self.invalid(
                "no program found: put a complete Python program in the answer block"
            )
        c = self.config
        if len(code) > int(c["max_code_chars"]):
            return self.invalid(f"the program is longer than {int(c['max_code_chars'])} characters")
        try:
            ast.parse(code)
        except (SyntaxError, ValueError, MemoryError, RecursionError) as exc:
            return self.invalid(
                f"the program does not parse: {type(exc).__name__}: {str(exc)[:300]}"
            )
        report = judge(
            code,
            self._scored,
            sandbox=self._sandbox,
            tol=float(c["float_tolerance"]),
            max_tests=c["max_tests"],
            stop_on_first_failure=bool(c["stop_on_first_failure"]),
            workers=int(c["parallel_tests"]),
            feedback_chars=int(c["feedback_chars"]),
            time_budget_s=None
            if c["step_time_budget_s"] is None
            else float(c["step_time_budget_s"]),
        )
        attempt = self._tracker.attempts
        reward = self._tracker.record(report.pass_rate)
        left = self._tracker.remaining
        success = report.all_passed
        terminated = success or self._tracker.exhausted
        summary = f"Attempt {attempt + 1}: {report.passed} of {report.total} tests passed."
        failure = report.first_failure
        if success:
            self._feedback = summary + " All tests passed."
        elif terminated:
            self._feedback = summary + " No attempts are left."
        else:
            detail = failure.feedback if failure is not None else ""
            self._feedback = (
                f"{summary}\nFirst failing test ({failure.status if failure else 'unknown'}):\n{detail}\n"
                f"You have {left} attempt{'s' if left != 1 else ''} left; answer with a corrected, "
                "complete program."
            )
        return Transition(
            reward=reward,
            terminated=terminated,
            success=success,
            info={
                "tests_passed": report.passed,
                "tests_total": report.total,
                "pass_rate": report.pass_rate,
                "attempt": attempt,
                "attempts_left": left,
                "first_failure_status": failure.status if failure is not None else None,
                "sandbox_level": sandbox_level(self._sandbox.namespaces),
            },
        )

    def _reset_info(self) -> dict[str, Any]:
        # Which sandbox the programs get ("namespaces" | "fallback"); "auto"
        # falling back also warns once per process (ragen_envs.sandbox.sandbox_level)
        return {**super()._reset_info(), "sandbox_level": sandbox_level(self._sandbox.namespaces)}

    def _item_text(self) -> str:
        return self._item.prompt

    @property
    def instruction(self) -> str:
        c = self.config
        retry = attempts_rule(
            c,
            "after a failed attempt you see the first failing test. Attempt k (from 0) is "
            "worth {decay}^k times the share of tests it passes.",
            "your reward is the share of tests your program passes.",
        )
        return join_lines(
            [
                "You are solving a programming problem in Python 3.",
                "Write a complete program (for stdin/stdout problems) or the complete requested function "
                "definition (for function problems), using only the standard library.",
                f"It runs in a sandbox without network access, with {float(c['time_limit_s']):g} s of CPU time and "
                f"{int(c['memory_limit_mb'])} MB of memory per test.",
                "Non-integer numbers in the output may differ from the expected ones by a relative or "
                f"absolute error of {float(c['float_tolerance']):g}; integers must be exact; whitespace "
                "between output tokens does not matter.",
                retry,
                "Put the code in the answer block, optionally in a ```python fence, for example:",
                "<answer>```python\nprint(sum(map(int, input().split())))\n```</answer>",
            ]
        )

    def oracle_actions(self) -> list[str]:
        """The problem's reference solution.

        Raises:
            NotImplementedError: the problem has none (e.g. LiveCodeBench records).
        """
        if self.status.is_terminal:
            return []
        if not self._item.reference_solution:
            raise NotImplementedError(f"problem {self._item.id} has no reference solution")
        return [f"```python\n{self._item.reference_solution}\n```"]

    def optimal_return(self) -> float:
        """Passing every test at the first attempt earns 1."""
        return 1.0

    def sample_action(self, rng: np.random.Generator) -> str:
        """A random trivial program: prints, or returns, a random integer below 100."""
        value = int(rng.integers(0, 100))
        first = self._item.tests[0]
        if isinstance(first, CheckTest):
            return f"def {first.entry_point}(*args, **kwargs):\n    return {value}\n"
        if isinstance(first, CallTest):
            return f"def {first.fn_name}(*args, **kwargs):\n    return {value}\n"
        return f"print({value})\n"

    @property
    def num_tests(self) -> int:
        """Scored tests of the current problem."""
        return tests_count(self._scored, self.config["max_tests"])
