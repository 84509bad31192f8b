"""Sandbox round-trip latency (pytest-benchmark).

Run with ``pytest benchmarks/test_sandbox_speed.py --benchmark-only``.  Not collected by
the default ``pytest`` run; no test asserts a time.

* ``test_round_trip_per_test_case``: one sandboxed run of ``print(input())`` with a line on
  stdin — the cost of one stdin/stdout test case (process tree start, namespaces, limits,
  program, result), as a function of the namespace policy.
* ``test_humaneval_check``: one HumanEval problem judged (canonical solution + its
  ``check``, one sandboxed run).
* ``test_deepcoder_step``: one ``DeepCoder`` step on a stdin/stdout problem of ours (six
  test cases, i.e. six sandboxed runs).
* ``test_python_start_reference``: a bare ``python -I -S -c pass`` subprocess, the floor
  the sandbox cannot go below.
"""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

import ragen_envs
from ragen_envs.data.loaders import load_source
from ragen_envs.envs.deepcoder.judge import reference_passes
from ragen_envs.envs.deepcoder.problems import problem_from_record
from ragen_envs.sandbox import SandboxConfig, run_python


def _fallback_python() -> str | None:
    cfg = SandboxConfig(namespaces="off")
    if run_python("pass", config=cfg).ok:
        return None
    return "/usr/bin/python3"


@pytest.mark.parametrize("namespaces", ["auto", "off"])
def test_round_trip_per_test_case(benchmark: Any, namespaces: str) -> None:
    cfg = SandboxConfig(
        namespaces=namespaces, python=_fallback_python() if namespaces == "off" else None
    )  # type: ignore[arg-type]
    benchmark.group = "sandbox"
    res = benchmark(lambda: run_python("print(input())", stdin="42\n", config=cfg))
    assert res.ok and res.stdout == "42\n"


def test_humaneval_check(benchmark: Any) -> None:
    problem = problem_from_record(load_source("bundled:humaneval")[0])
    benchmark.group = "sandbox"
    report = benchmark(lambda: reference_passes(problem))
    assert report.all_passed


def test_deepcoder_step(benchmark: Any) -> None:
    env = ragen_envs.make("ragen/DeepCoder-v0", data_source="bundled:code-stdio-ours").unwrapped
    env.reset(seed=0)
    action = env.oracle_actions()[0]
    benchmark.group = "sandbox"

    def setup() -> tuple[tuple[str], dict]:
        env.reset(seed=0)
        return (action,), {}

    result = benchmark.pedantic(env.step, setup=setup, rounds=20)
    assert result[4]["success"]


def test_python_start_reference(benchmark: Any) -> None:
    benchmark.group = "sandbox"
    benchmark(lambda: subprocess.run([sys.executable, "-I", "-S", "-c", "pass"], check=True))
