"""The Lean REPL back-end against a real subprocess speaking ``lake exe repl``'s framing
(``lean_fake_repl.py``, answering from Lean's recorded transcripts): what it sends,
and a crashed, silent or missing REPL detected and reported as a one-line ``env_error``."""

from __future__ import annotations

import json
import os
import shlex
import sys
import time
from pathlib import Path

import pytest

import ragen_envs

from .lean_support import FAKE_REPL, PROOF, lean_env, repl_spec


def test_repl_sends_header_and_statement_once_then_one_command_per_tactic(
    tmp_path: Path,
) -> None:
    log = tmp_path / "requests.jsonl"
    env = lean_env(repl_spec("--log", str(log)))
    for _ in range(2):
        env.reset(options={"theorem": "two_eq"})
        _, reward, term, _, info = env.step("rfl")
        assert term and info["success"] and reward == pytest.approx(10.9)
    env.reset(options={"theorem": "complex_and"})
    env.step(PROOF[0])
    env.close()
    sent = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()]
    assert sent == [
        {"cmd": "open Nat\n"},
        {"cmd": "theorem two_eq : 2 = 2 := by sorry", "env": 0},
        {"tactic": "rfl", "proofState": 0},
        # a finished proof is checked with #print axioms, in the header's env
        {"cmd": "theorem two_eq : 2 = 2 := by\n  rfl\n\n#print axioms two_eq\n", "env": 0},
        {
            "tactic": "rfl",
            "proofState": 0,
        },  # the next episode starts again from the root proof state
        {"cmd": "theorem two_eq : 2 = 2 := by\n  rfl\n\n#print axioms two_eq\n", "env": 0},
        {"cmd": "theorem complex_and (p q r : Prop) (h1 : p ∧ q) (h2 : q → r) : p ∧ r := by sorry"},
        {"tactic": "apply And.intro", "proofState": 3},
    ]


def test_repl_crash_is_detected_and_reported() -> None:
    env = lean_env(repl_spec("--crash-on", "nlinarith"), max_retries=1)
    env.reset(options={"theorem": "complex_and"})
    assert env.step(PROOF[0])[4]["tactic_outcome"] == "accepted"
    obs, reward, term, trunc, info = env.step("nlinarith")
    assert (reward, term, trunc, info["status"]) == (0.0, False, True, "env_error")
    msg = info["verifier_error"]
    assert (
        msg.startswith("Lean REPL '")
        and "failed on tactic 'nlinarith': it exited with status 3; "
        "stderr: INTERNAL PANIC: out of memory (after 2 tries)"
        in msg
    )
    assert msg in obs
    env.close()


@pytest.mark.timeout(60)
def test_repl_silent_is_detected_and_reported() -> None:
    env = lean_env(repl_spec("--silent"), start_timeout_s=0.5, max_retries=1)
    env.reset(options={"theorem": "complex_and"})
    info = env.step(PROOF[0])[4]
    assert info["status"] == "env_error"
    assert info["verifier_error"].endswith(
        "gave no answer to the statement command within 0.5 s (after 2 tries)"
    )
    env.close()


def test_repl_missing_executable_names_it() -> None:
    env = lean_env("repl:no-such-lean-repl-xyz exe repl")
    env.reset(options={"theorem": "complex_and"})
    info = env.step(PROOF[0])[4]
    assert info["status"] == "env_error" and info["verifier_attempts"] == 1
    assert info["verifier_error"].startswith(
        "Lean REPL executable not found: 'no-such-lean-repl-xyz' "
        "(command 'no-such-lean-repl-xyz exe repl')"
    )


def test_repl_unanswerable_request_ends_the_episode_not_the_process() -> None:
    """The fake REPL exits (status 4) on a request nobody recorded: reported with its stderr."""
    env = lean_env(repl_spec(), max_retries=0)
    env.reset(options={"theorem": "complex_and"})
    info = env.step("simp_all")[4]
    assert info["status"] == "env_error"
    assert (
        "it exited with status 4; stderr: lean_fake_repl: no recorded answer for tactic 'simp_all'"
        in info["verifier_error"]
    )
    ragen_envs.validate_info("lean", info)


@pytest.mark.timeout(60)
def test_repl_timeout_kills_the_repl_under_its_launcher(tmp_path: Path) -> None:
    """``lake exe repl`` runs ``repl`` as a child: after a timeout neither may be left running."""
    pid_file = tmp_path / "pid"
    inner = shlex.join(
        [sys.executable, str(FAKE_REPL), "--hang-on", "nlinarith", "--pid-file", str(pid_file)]
    )
    env = lean_env("repl:" + shlex.join(["sh", "-c", inner + "; true"]), lean_timeout_s=0.5)
    env.reset(options={"theorem": "complex_and"})
    env.step(PROOF[0])
    child = int(pid_file.read_text())
    assert env.step("nlinarith")[4]["tactic_outcome"] == "timeout"
    for _ in range(50):
        try:
            os.kill(child, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    else:
        pytest.fail(f"the REPL child {child} outlived its launcher")
    env.close()


def test_repl_memory_limit_applies_to_the_process() -> None:
    """An address-space cap too small for the interpreter: the REPL dies at start, reported."""
    env = lean_env(repl_spec(), repl_memory_mb=8, max_retries=0)
    env.reset(options={"theorem": "complex_and"})
    info = env.step(PROOF[0])[4]
    assert (
        info["status"] == "env_error"
        and "failed on the statement command: it exited with status" in info["verifier_error"]
    )
    env = lean_env(repl_spec(), repl_memory_mb=4096)
    env.reset(options={"theorem": "complex_and"})
    assert env.step(PROOF[0])[4]["tactic_outcome"] == "accepted"
    env.close()
