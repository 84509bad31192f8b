"""Shared fixtures: every registered environment id, schema helpers."""

from __future__ import annotations

import os

import pytest

import ragen_envs

ALL_IDS = [e.id for e in ragen_envs.list_envs()]

#: Seeds per id for the oracle / random sweeps (the foundation issue asks for >= 200).
N_SWEEP_SEEDS = int(os.environ.get("RAGEN_TEST_SEEDS", "200"))


@pytest.fixture(params=ALL_IDS)
def env_id(request: pytest.FixtureRequest) -> str:
    return request.param
