"""Lean env speed (pytest-benchmark): reset, and one tactic step per verifier back-end.

Run with ``pytest benchmarks/test_lean_speed.py --benchmark-only``.  No Lean runs here, so
the step figures are the env's and the protocol's own cost against stand-ins that answer
from Lean's recorded answers (``tests/envs/lean_fakes.py``): they bound what the env adds
to a real Lean's time (seconds for a Mathlib tactic), they do not measure Lean.

* ``test_reset``: ``reset(seed=k)`` on the bundled miniF2F train split (no verifier call).
* ``test_step[replay]``: the in-process replay back-end (a dictionary look-up).
* ``test_step[kimina]``: HTTP to the local Kimina stand-in on 127.0.0.1 (httpx, keep-alive;
  the server rebuilds the answer from the recorded transcripts per request).
* ``test_step[repl]``: JSON over the pipes of the fake ``lake exe repl`` subprocess.

Each timed step is ``apply And.intro`` on the REPL test theorem ``complex_and``; the setup
resets the env and plays the no-op ``skip`` first, so the statement check is outside the
timed region and only the tactic is timed.
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import ragen_envs

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "envs"))

from lean_fakes import DATA, KiminaServer  # noqa: E402
from lean_support import lean_env, repl_spec  # noqa: E402

REPLAY = DATA / "sweep.replay.jsonl"


def test_reset(benchmark: Any) -> None:
    env = ragen_envs.make("ragen/Lean-v0", verifier="replay:" + str(REPLAY)).unwrapped
    seeds = itertools.count()
    benchmark.group = "lean reset"
    obs, _ = benchmark(lambda: env.reset(seed=next(seeds)))
    assert obs.startswith("Theorem ")


@pytest.fixture(params=["replay", "kimina", "repl"])
def stepping_env(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Any]:
    if request.param == "replay":
        goal = "p q r : Prop\nh1 : p ∧ q\nh2 : q → r\n⊢ p ∧ r"
        path = tmp_path / "bench.replay.jsonl"
        path.write_text(
            '{"theorem": "complex_and", "tactics": ["skip"], "answer": {"proofState": 1, "goals": ["'
            + goal.replace("\n", "\\n")
            + '"]}}\n'
            '{"theorem": "complex_and", "tactics": ["apply And.intro"], "answer": {"proofState": 2, '
            '"goals": ["case left\\n⊢ p", "case right\\n⊢ r"]}}\n',
            encoding="utf-8",
        )
        env = lean_env("replay:" + str(path))
        yield env
        env.close()
    elif request.param == "kimina":
        pytest.importorskip("httpx")
        with KiminaServer() as server:
            env = lean_env(server.url)
            yield env
            env.close()
    else:
        env = lean_env(repl_spec())
        yield env
        env.close()


def test_step(benchmark: Any, stepping_env: Any) -> None:
    env = stepping_env

    def setup() -> None:
        env.reset(options={"theorem": "complex_and"})
        env.step("skip")

    benchmark.group = "lean step"
    result = benchmark.pedantic(
        lambda: env.step("apply And.intro"), setup=setup, rounds=200, warmup_rounds=5
    )
    assert result[4]["tactic_outcome"] == "accepted"
