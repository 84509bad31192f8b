"""Reproducibility from a seed (DESIGN.md "Environments"; foundation issue, "Seeds and splits").

* Across processes: the same seed gives identical episodes (observations, rewards,
  infos, instruction) in fresh interpreters with different ``PYTHONHASHSEED``; Python's
  salted ``hash`` (RAGEN's retry seed) or set-iteration order would break this.
* Random access: ``reset(seed=i)`` gives the same instance whatever resets and steps
  came before (item i needs no items 0..i-1).
* No global RNG: seeding ``random`` / ``numpy.random`` differently changes nothing, and
  running episodes does not even read the global streams.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from typing import Any

import numpy as np
import pytest

import ragen_envs
from ragen_envs.baselines import EpisodeResult, make_random_policy, oracle_policy, run_episode

from .conftest import ALL_IDS, REPO

SEEDS = (0, 1, 2)

#: Runs the episodes of :func:`_episodes` in a fresh interpreter and prints them as JSON.
_SCRIPT = """
import json, sys
sys.path.insert(0, {repo!r})
from tests.envs.test_determinism import _all_episodes
print(json.dumps(_all_episodes(), sort_keys=True))
"""


def _record(env: Any, result: EpisodeResult) -> dict[str, Any]:
    return {
        "instruction": env.unwrapped.instruction,
        "actions": result.actions,
        "observations": result.observations,
        "rewards": [repr(r) for r in result.rewards],  # repr: exact floats
        "infos": json.loads(json.dumps(result.infos, sort_keys=True, default=repr)),
        "terminated": result.terminated,
        "truncated": result.truncated,
    }


def _episodes(env_id: str) -> dict[str, Any]:
    """Oracle and seeded random-baseline episodes of ``env_id`` for :data:`SEEDS`."""
    env = ragen_envs.make(env_id)
    out: dict[str, Any] = {}
    for seed in SEEDS:
        out[f"oracle/{seed}"] = _record(env, run_episode(env, oracle_policy, seed=seed))
        out[f"random/{seed}"] = _record(
            env, run_episode(env, make_random_policy(seed + 1000), seed=seed)
        )
    return out


def _all_episodes() -> dict[str, Any]:
    return {env_id: _episodes(env_id) for env_id in ALL_IDS}


def _in_fresh_process(hash_seed: str) -> dict[str, Any]:
    env = {**os.environ, "PYTHONHASHSEED": hash_seed}
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT.format(repo=str(REPO))],
        capture_output=True,
        text=True,
        env=env,
        cwd=str(REPO),
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    return json.loads(proc.stdout)


def test_same_seed_same_episodes_across_processes_and_hash_seeds() -> None:
    a = _in_fresh_process("0")
    b = _in_fresh_process("12345")
    assert set(a) == set(ALL_IDS)
    for env_id in ALL_IDS:
        for key in a[env_id]:
            assert a[env_id][key] == b[env_id][key], (
                f"{env_id} {key} differs between PYTHONHASHSEED 0 and 12345"
            )
    # ... and the same as in this process (whatever its hash seed).
    here = json.loads(json.dumps(_all_episodes(), sort_keys=True))
    assert here == a


def _scramble(env: Any, rng: np.random.Generator) -> None:
    """Put ``env`` in an arbitrary state: unrelated resets and a few random steps."""
    env.reset(seed=int(rng.integers(10**6)))
    env.reset()
    policy = make_random_policy(int(rng.integers(10**6)))
    for _ in range(3):
        action = policy(env.unwrapped, "")[0]
        *_, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break


def _trace(result: EpisodeResult) -> tuple[Any, ...]:
    return (result.observations, result.rewards, result.actions, result.infos)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_reset_seed_is_random_access(env_id: str) -> None:
    """``reset(seed=i)`` after anything equals ``reset(seed=i)`` of a fresh env."""
    used = ragen_envs.make(env_id)
    rng = np.random.default_rng(7)
    for i in (0, 5, 3, 123_456, 5):
        fresh = ragen_envs.make(env_id)
        want_obs, want_info = fresh.reset(seed=i)
        want_instruction = fresh.unwrapped.instruction
        _scramble(used, rng)
        obs, info = used.reset(seed=i)
        assert (obs, info) == (want_obs, want_info), f"seed {i}"
        assert used.unwrapped.instruction == want_instruction
        # The random stream after the reset is the same too: identical oracle episodes.
        assert _trace(run_episode(used, oracle_policy, seed=i)) == _trace(
            run_episode(fresh, oracle_policy, seed=i)
        )


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_reset_without_seed_continues_the_seeded_stream(env_id: str) -> None:
    a, b = ragen_envs.make(env_id), ragen_envs.make(env_id)
    a.reset(seed=11)
    b.reset(seed=11)
    for _ in range(3):
        assert a.reset() == b.reset()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_no_global_rng(env_id: str) -> None:
    """Global ``random`` / ``numpy.random`` seeds change nothing and are never read."""
    traces = []
    for global_seed in (1, 2):
        random.seed(global_seed)
        np.random.seed(global_seed)
        py_state, np_state = random.getstate(), np.random.get_state()
        env = ragen_envs.make(env_id)
        run = [_trace(run_episode(env, oracle_policy, seed=s)) for s in SEEDS]
        run += [_trace(run_episode(env, make_random_policy(s), seed=s)) for s in SEEDS]
        traces.append(run)
        assert random.getstate() == py_state, "the env read Python's global random stream"
        np_after = np.random.get_state()
        assert (
            np_after[0] == np_state[0]
            and np.array_equal(np_after[1], np_state[1])
            and np_after[2:] == np_state[2:]
        ), "the env read numpy's global random stream"
    assert traces[0] == traces[1]
