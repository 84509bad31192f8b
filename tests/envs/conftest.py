"""Shared fixtures: every registered environment id, schema helpers."""

from __future__ import annotations

import os

import pytest

import ragen_envs

ALL_IDS = [e.id for e in ragen_envs.list_envs()]

#: Seeds per id for the oracle / random sweeps (the foundation issue asks for >= 200).
N_SWEEP_SEEDS = int(os.environ.get("RAGEN_TEST_SEEDS", "200"))

#: Envs whose every step runs sandboxed subprocesses sweep fewer seeds in the generic tests;
#: every one of their bundled items is played by the oracle in their own test file
#: (tests/test_deepcoder.py), so coverage is not reduced.
SWEEP_SEEDS_BY_ENV = {"deepcoder": 40}


def sweep_seeds(env_id: str) -> int:
    """Seeds the generic oracle / random sweeps use for ``env_id``."""
    key = ragen_envs.get_entry(env_id).env_key
    return min(N_SWEEP_SEEDS, SWEEP_SEEDS_BY_ENV.get(key, N_SWEEP_SEEDS))


@pytest.fixture(params=ALL_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param
