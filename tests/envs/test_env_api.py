"""The Gymnasium contract, oracle, random baseline and info schema for every registered id."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import ragen_envs
from ragen_envs.baselines import make_random_policy, oracle_policy, run_episode
from ragen_envs.envs.frozenlake import FrozenLakeEnv

from .conftest import ALL_IDS, InfoChecker, sweep_seeds


def test_every_env_registered_with_gymnasium() -> None:
    assert ALL_IDS, "no environment registered"
    for env_id in ALL_IDS:
        assert env_id in gym.registry
        assert env_id.startswith("ragen/") and "-v" in env_id


#: Seeds of ragen_envs.check_env per id (an env whose every step runs sandboxed code: fewer).
CHECK_SEEDS = {"deepcoder": 2}


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_public_checker_passes(env_id: str) -> None:
    """ragen_envs.check_env: Gymnasium's checker (warnings as errors), the schemas,
    reproducible seeds, disjoint splits, bad actions, the oracle."""
    key = ragen_envs.get_entry(env_id).env_key
    report = ragen_envs.check_env(env_id, seeds=CHECK_SEEDS.get(key, 3))
    assert report.passed, report.table()
    assert [c.name for c in report.checks if c.status == "pass"][:3] == [
        "gymnasium",
        "schemas",
        "reproducible",
    ]


class _IgnoresItsSeed(FrozenLakeEnv):
    """A planted broken env: its instance comes from the global NumPy state, not the seed."""

    def _reset(self, options):  # noqa: ANN001, ANN202
        super()._reset(options)
        self._state = int(np.random.randint(0, 3))  # noqa: NPY002 - the planted defect


class _CrashesOnBlank(FrozenLakeEnv):
    """A planted broken env: a blank action raises instead of being an invalid action."""

    def _step(self, action):  # noqa: ANN001, ANN202
        if not action.strip():
            raise IndexError("empty action")
        return super()._step(action)


@pytest.mark.parametrize(
    ("cls", "failed"), [(_IgnoresItsSeed, "reproducible"), (_CrashesOnBlank, "bad actions")]
)
def test_public_checker_fails_a_planted_broken_env(cls: type, failed: str) -> None:
    report = ragen_envs.check_env(cls, seeds=3)
    assert not report.passed
    assert failed in [c.name for c in report.failures()], report.table()
    assert "FAILED" in report.table()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_spaces_and_instruction(env_id: str) -> None:
    env = ragen_envs.make(env_id)
    obs, info = env.reset(seed=0)
    base = env.unwrapped
    assert isinstance(base, ragen_envs.TextEnv)
    assert isinstance(env.observation_space, gym.spaces.Text)
    assert isinstance(env.action_space, gym.spaces.Text)
    assert obs in env.observation_space
    text = base.instruction
    assert isinstance(text, str) and len(text) > 40
    assert "<answer>" in text, "the instruction must show an answer example"
    # The instruction is separate from the observation.
    assert text.strip() != obs.strip()


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_oracle_reaches_maximum_and_infos_validate(env_id: str) -> None:
    env = ragen_envs.make(env_id)
    base = env.unwrapped
    check = InfoChecker(ragen_envs.get_entry(env_id).env_key)
    successes = 0
    for seed in range(sweep_seeds(env_id)):
        result = run_episode(env, oracle_policy, seed=seed)
        for info in result.infos:
            check(info)
        assert result.terminated or result.truncated
        successes += result.success
        if getattr(base, "oracle_is_exact", True):
            assert result.success, f"oracle failed on seed {seed}: {result.status}"
            expected = base.optimal_return()
            if expected is not None:
                assert result.episode_return == pytest.approx(expected, abs=1e-9)
    assert successes > 0


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_random_baseline_runs_and_infos_validate(env_id: str) -> None:
    env = ragen_envs.make(env_id)
    check = InfoChecker(ragen_envs.get_entry(env_id).env_key)
    policy = make_random_policy(seed=1)
    for seed in range(sweep_seeds(env_id)):
        result = run_episode(env, policy, seed=seed)
        assert result.status in {"success", "failure", "step_limit"}
        for info in result.infos:
            check(info)
        assert np.isfinite(result.episode_return)


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_step_after_end_and_before_reset_raise_reset_needed(env_id: str) -> None:
    env = gym.make(env_id).unwrapped
    with pytest.raises(gym.error.ResetNeeded):
        env.step("x")
    result = run_episode(env, oracle_policy, seed=3)
    assert result.terminated or result.truncated
    with pytest.raises(gym.error.ResetNeeded):
        env.step("x")


@pytest.mark.parametrize("env_id", ALL_IDS)
def test_non_string_action_is_invalid(env_id: str) -> None:
    env = gym.make(env_id).unwrapped
    env.reset(seed=0)
    obs, reward, terminated, truncated, info = env.step(12345)  # type: ignore[arg-type]
    assert info["action_is_valid"] is False
    assert reward == env.config["invalid_action_reward"]
    assert terminated is False


def test_list_envs_reports_presets_and_versions() -> None:
    entries = ragen_envs.list_envs()
    assert {e.id for e in entries} == set(ALL_IDS)
    for e in entries:
        assert e.version >= 0 and e.name and e.description
        expected = (
            f"ragen/{e.name}-v{e.version}"
            if e.preset is None
            else f"ragen/{e.name}-{e.preset}-v{e.version}"
        )
        assert e.id == expected


def test_make_rejects_unknown_id_with_suggestion() -> None:
    with pytest.raises(ragen_envs.UnknownEnvError, match="did you mean ragen/Bandit-v0"):
        ragen_envs.make("ragen/Bandt-v0")


@pytest.mark.parametrize(
    ("field", "value", "match"),
    [
        ("risky_prob", 2, "risky_prob"),
        ("max_steps", 0, "max_steps"),
        ("split", "dev", "split"),
        ("no_such_field", 1, "no_such_field"),
        ("steady_reward", "high", "steady_reward"),
    ],
)
def test_make_names_the_bad_field(field: str, value: object, match: str) -> None:
    with pytest.raises(ragen_envs.ConfigError, match=match) as exc:
        ragen_envs.make("ragen/Bandit-v0", **{field: value})
    assert exc.value.field == field


def test_config_error_also_raised_by_gymnasium_make() -> None:
    with pytest.raises(ragen_envs.ConfigError, match="max_steps"):
        gym.make("ragen/Bandit-v0", max_steps=-3)


# ------------------------------------------------ NaN and out-of-range numbers
@pytest.mark.parametrize(
    ("env_id", "field", "value"),
    [
        (
            "ragen/Bandit-v0",
            "risky_prob",
            float("nan"),
        ),  # used to pass minimum/maximum and score success 1.0
        ("ragen/Bandit-v0", "risky_reward", float("inf")),
        ("ragen/Bandit-v0", "invalid_action_reward", float("-inf")),
        ("ragen/FrozenLake-v0", "success_rate", float("nan")),
        ("ragen/Sudoku-v0", "max_steps", float("inf")),  # through an anyOf
    ],
)
def test_env_configs_refuse_non_finite_numbers(env_id: str, field: str, value: float) -> None:
    with pytest.raises(ragen_envs.ConfigError) as exc:
        ragen_envs.make(env_id, **{field: value})
    assert (
        exc.value.field == field and exc.value.reason == f"must be a finite number, got {value!r}"
    )


def test_info_checker_validates_each_distinct_info_once() -> None:
    """The sweeps' checker skips only infos it has validated verbatim; any other info is
    validated, so a bad one still fails."""
    import jsonschema

    check = InfoChecker("sokoban")
    env = ragen_envs.make("ragen/Sokoban-v0")
    _, info = env.reset(seed=0)
    check(info)
    check(dict(info))
    assert check.validated == 1
    _, _, _, _, step_info = env.step(env.unwrapped.oracle_actions()[0])
    check(step_info)
    assert check.validated == 2
    with pytest.raises(jsonschema.ValidationError, match="no_such_key"):
        check({**info, "no_such_key": 1})
