"""Shared helpers of the env tests: every registered environment id, sweep sizes, scripts.

The env tests (``tests/envs/``) import only ``ragen_envs``, gymnasium, numpy, jsonschema,
pytest and hypothesis (and an env's optional extra where its test needs it), so they run
against the installed ``ragen-envs`` wheel alone (``scripts/test_envs_wheel.py``).

**The generic sweep.**  :data:`ALL_IDS` is read from the registry, so every test
parametrised over it — the Gymnasium checker, the info schemas, the oracle and random
sweeps (``test_env_api.py``), bad input (``test_bad_input.py``, ``test_long_actions.py``),
determinism across processes (``test_determinism.py``), golden first observations
(``test_golden.py``), the group adapter (``test_group.py``) — picks a newly registered
env up with no edit here (``docs/envs/adding-an-env.md``; ``test_template_env.py``
checks that every registered id is swept).
"""

from __future__ import annotations

import importlib.util
import os
import types
from pathlib import Path

import pytest

import ragen_envs

#: The repository root (``tests/envs/`` is two levels down).
REPO = Path(__file__).resolve().parents[2]

#: Every registered id, in registration order (the parameter list of the generic sweep).
ALL_IDS = [e.id for e in ragen_envs.list_envs()]

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
    """Import ``scripts/<name>.py`` of the repository as a module (scripts are not a package).

    Raises:
        FileNotFoundError: no such script.
    """
    path = REPO / "scripts" / f"{name}.py"
    if not path.is_file():
        raise FileNotFoundError(f"no script {path}")
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
