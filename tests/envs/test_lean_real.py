"""Opt-in: the Lean env against a real Lean, when the user has one (none runs on our machines).

* ``RAGEN_LEAN_URL=http://host:port`` — a Kimina Lean Server (``LEAN_SERVER_API_KEY`` if it has a key);
* ``RAGEN_LEAN_REPL="lake exe repl"`` — the Lean REPL command, run in ``RAGEN_LEAN_REPL_CWD``
  (a Lean project with Mathlib for the miniF2F check).

They replay the REPL's recorded proof of ``complex_and`` and check what our fakes assume
(no-op, sorry, the whole-proof probe on Kimina), then one miniF2F step (any verdict but
an ``env_error``).  Otherwise they skip, saying which variable to set.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

import ragen_envs

from .lean_support import PROOF, lean_env

_TARGETS = []
if os.environ.get("RAGEN_LEAN_URL"):
    _TARGETS.append(pytest.param(os.environ["RAGEN_LEAN_URL"], id="kimina"))
else:
    _TARGETS.append(
        pytest.param(
            None,
            id="kimina",
            marks=pytest.mark.skip(
                reason="set RAGEN_LEAN_URL=http://host:port to run against a real Kimina Lean Server"
            ),
        )
    )
if os.environ.get("RAGEN_LEAN_REPL"):
    _TARGETS.append(pytest.param("repl:" + os.environ["RAGEN_LEAN_REPL"], id="repl"))
else:
    _TARGETS.append(
        pytest.param(
            None,
            id="repl",
            marks=pytest.mark.skip(
                reason="set RAGEN_LEAN_REPL='lake exe repl' (and RAGEN_LEAN_REPL_CWD) to run against a real Lean REPL"
            ),
        )
    )


def _cfg() -> dict[str, Any]:
    return {
        "repl_cwd": os.environ.get("RAGEN_LEAN_REPL_CWD"),
        "lean_timeout_s": 120,
        "retry_backoff_s": 1.0,
    }


@pytest.mark.parametrize("spec", _TARGETS)
def test_real_lean_recorded_proof_noop_and_sorry(spec: str) -> None:
    env = lean_env(spec, **_cfg())
    env.reset(options={"theorem": "complex_and"})
    outcomes = [env.step(t)[4]["tactic_outcome"] for t in ("skip", "sorry", *PROOF)]
    assert outcomes == [
        "no_progress",
        "rejected",
        "accepted",
        "accepted",
        "accepted",
        "accepted",
    ], env.render()
    assert env.status.value == "success"
    env.close()


@pytest.mark.parametrize("spec", _TARGETS)
def test_real_lean_minif2f_step(spec: str) -> None:
    env = ragen_envs.make("ragen/Lean-v0", verifier=spec, split="test", **_cfg()).unwrapped
    env.reset(seed=0)
    info = env.step("norm_num")[4]
    assert info["status"] != "env_error", info.get("verifier_error")
    assert info["tactic_outcome"] in ("accepted", "no_progress", "rejected", "timeout")
    env.close()
