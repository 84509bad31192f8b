"""Shared fixtures: every registered environment id, schema helpers.

``ALL_IDS`` is read from the registry: the generic sweep picks a new env up with no edit
(``docs/envs/adding-an-env.md``; ``template_test_env.py`` lists the sweep).
"""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

# Lean needs a Lean verifier, which no machine of ours has: the generic sweeps play the
# ragen/Lean-* ids against the replay back-end and a synthetic recording (every theorem has
# a made-up two-tactic proof, anything else is rejected; tests/data/lean/README.md).  Set
# unconditionally, so that a user's own RAGEN_LEAN_VERIFIER cannot change what the sweeps
# expect; tests/envs/test_lean_*.py choose their verifier explicitly.  Subprocesses
# (test_determinism, test_wheel) inherit it.
os.environ["RAGEN_LEAN_VERIFIER"] = "replay:" + os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
    "data",
    "lean",
    "sweep.replay.jsonl",
)

import ragen_envs  # noqa: E402

ALL_IDS = [e.id for e in ragen_envs.list_envs()]

REPO = Path(__file__).resolve().parents[2]

#: Seeds per id for the oracle / random sweeps (the foundation issue asks for >= 200).
N_SWEEP_SEEDS = int(os.environ.get("RAGEN_TEST_SEEDS", "200"))

#: Envs whose every step runs sandboxed subprocesses sweep fewer seeds in the generic tests;
#: every one of their bundled items is played by the oracle in their own test file
#: (tests/envs/test_deepcoder.py), so coverage is not reduced.
SWEEP_SEEDS_BY_ENV = {"deepcoder": 40}


def sweep_seeds(env_id: str) -> int:
    """Seeds the generic oracle / random sweeps use for ``env_id``."""
    key = ragen_envs.get_entry(env_id).env_key
    return min(N_SWEEP_SEEDS, SWEEP_SEEDS_BY_ENV.get(key, N_SWEEP_SEEDS))


@pytest.fixture(params=ALL_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param


def load_script(name: str) -> types.ModuleType:
    """Import ``scripts/<name>.py`` as a module (scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None, name
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class InfoChecker:
    """Validates step/reset infos against env ``key``'s info schema
    (:func:`ragen_envs.validate_info`), each distinct info once.

    The validator is a pure function of the info, and long sweeps repeat infos verbatim (a
    Sokoban or Lean episode often returns to a state it has been in), so an info whose
    ``repr`` was validated already is not validated again.  ``repr`` tells ``1`` from
    ``1.0``, ``True`` and ``"1"``, and every float exactly, so two infos with the same
    ``repr`` get the same verdict.
    """

    def __init__(self, key: str) -> None:
        self.key = key
        self.seen: set[str] = set()
        self.validated = 0

    def __call__(self, info: dict) -> None:
        text = repr(info)
        if text not in self.seen:
            ragen_envs.validate_info(self.key, info)
            self.seen.add(text)
            self.validated += 1
