"""Shared pieces of the Lean tests: the test theorems and env factories per back-end."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import ragen_envs

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from lean_fakes import DATA, THEOREMS, KiminaServer  # noqa: E402

FAKE_REPL = HERE / "lean_fake_repl.py"

#: The recorded proof of complex_and (leanprover-community/repl test/proof_branching).
PROOF = ["apply And.intro", "exact h1.left", "apply h2", "exact h1.right"]

__all__ = ["DATA", "FAKE_REPL", "PROOF", "THEOREMS", "KiminaServer", "lean_env", "repl_spec"]


def repl_spec(*fault: str) -> str:
    """The verifier spec that runs the fake REPL as a subprocess (with fault options)."""
    return "repl:" + " ".join([sys.executable, str(FAKE_REPL), *fault])


def lean_env(verifier: str, **config: Any) -> Any:
    """``ragen/Lean-v0`` over the test theorems (their split is ``test``), fast retries."""
    cfg = {
        "data_source": str(THEOREMS),
        "split": "test",
        "retry_backoff_s": 0.01,
        "render_mode": "ansi",
        **config,
    }
    return ragen_envs.make("ragen/Lean-v0", verifier=verifier, **cfg).unwrapped
