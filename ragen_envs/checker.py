"""``check_env``: the generic contract every ragen environment meets, as one public call.

Gymnasium ships :func:`gymnasium.utils.env_checker.check_env` for the API; a ragen env
promises more (docs/envs/README.md): configs and infos that follow its JSON Schemas,
reproducible seeds, disjoint splits, bad actions that are penalties and never crashes, and
an oracle that reaches its own optimum.  :func:`check_env` runs each promise as one named
check and returns a :class:`CheckReport`; ``ragen-bench check-env ID`` (or
``--entry-point module:Class`` for an env that is not registered) prints it as a table.
The project's own test suite runs it on every registered id (tests/envs/test_env_api.py).
"""

from __future__ import annotations

import importlib
import math
import traceback
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import gymnasium as gym
import numpy as np
from gymnasium.utils.env_checker import check_env as gymnasium_check_env

from .baselines import make_random_policy, oracle_policy, run_episode
from .config import ConfigError, config_defaults, validate_config, validate_info
from .core import TextEnv

#: Actions an agent's parser can hand an env: empty, blank, huge, control and format
#: characters, markup, a near-miss of a typical action.  Each must give a well-typed step
#: whose info follows the schema; none may raise.
FUZZ_ACTIONS: tuple[str, ...] = (
    "",
    "   ",
    "\n\t",
    "x" * 100_000,
    "\x00\x01\x7f",
    "\u202e\u200b\ufeff",
    "<answer>Up</answer>",
    "Up || Down",
    "🙂" * 50,
    "DROP TABLE;",
    "-1",
    "9" * 400,
)
#: Non-string actions: each is an invalid action (TextEnv.step's rule).
NON_STRING_ACTIONS: tuple[Any, ...] = (None, 12345, 1.5, ["Up"], {"a": 1})


@dataclass
class Check:
    """One named check: ``status`` is ``"pass"``, ``"fail"`` or ``"skip"``; ``detail``
    says what was checked, or what went wrong (the first failure), or why it was skipped."""

    name: str
    status: str
    detail: str


@dataclass
class CheckReport:
    """What :func:`check_env` found: one :class:`Check` per promise, in order."""

    env: str
    checks: list[Check] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        """No check failed (skipped checks do not fail a report)."""
        return all(c.status != "fail" for c in self.checks)

    def failures(self) -> list[Check]:
        """The checks that failed."""
        return [c for c in self.checks if c.status == "fail"]

    def to_dict(self) -> dict[str, Any]:
        """JSON form: ``{"env", "passed", "checks": [{"name", "status", "detail"}]}``."""
        return {
            "env": self.env,
            "passed": self.passed,
            "checks": [vars(c).copy() for c in self.checks],
        }

    def table(self) -> str:
        """A plain-text pass/fail table, one line per check."""
        width = max(len(c.name) for c in self.checks) if self.checks else 0
        lines = [f"check_env {self.env}: {'passed' if self.passed else 'FAILED'}"]
        lines += [f"  {c.status.upper():4}  {c.name:<{width}}  {c.detail}" for c in self.checks]
        return "\n".join(lines)


class _Failed(Exception):
    """A check's own failure (its message is the check's detail)."""


def _load(env_or_id: Any, config: dict[str, Any]) -> Callable[[], TextEnv]:
    """A factory of fresh unwrapped envs for an id, a ``module:Class`` entry point, an env
    class or an env instance (whose class and config are reused)."""
    if isinstance(env_or_id, gym.Env):
        base = env_or_id.unwrapped
        cls, conf = type(base), {**getattr(base, "config", {}), **config}
        return lambda: cast(TextEnv, cls(**conf))
    if isinstance(env_or_id, type):
        return lambda: env_or_id(**config)
    if isinstance(env_or_id, str) and ":" in env_or_id and "/" not in env_or_id:
        module, _, name = env_or_id.partition(":")
        try:
            cls = getattr(importlib.import_module(module), name)
        except (ImportError, AttributeError) as exc:
            raise ValueError(f"entry point {env_or_id!r} cannot be loaded: {exc}") from exc
        return lambda: cls(**config)
    if isinstance(env_or_id, str):
        from .registry import make

        return lambda: cast(TextEnv, make(env_or_id, **config).unwrapped)
    raise TypeError(
        f"check_env takes an env id, 'module:Class', a class or an env, not {env_or_id!r}"
    )


def _check_info(key: str, info: dict[str, Any], where: str) -> None:
    for name in ("action_is_valid", "action_is_effective", "success"):
        if name not in info:
            raise _Failed(f"{where}: info lacks {name!r} (docs/envs/README.md, info contract)")
    if key:
        try:
            validate_info(key, info)
        except Exception as exc:  # noqa: BLE001 - the schema's message is the detail
            raise _Failed(f"{where}: info does not follow the info schema: {exc}") from exc


def _gymnasium(factory: Callable[[], TextEnv], seeds: int) -> str:
    env = factory()
    # Gymnasium tests other render modes only through an env spec (gymnasium.make); a
    # class given directly has none, and the checker would only warn that it cannot.
    no_spec = env.spec is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # any checker warning is a failure
        gymnasium_check_env(env, skip_render_check=no_spec)
    return "gymnasium.utils.env_checker.check_env, warnings as errors" + (
        " (no env spec: render modes not checked)" if no_spec else ""
    )


def _schemas(factory: Callable[[], TextEnv], seeds: int) -> str:
    env = factory()
    key = getattr(env, "env_key", "")
    if not key:
        raise _Failed("the env class has no env_key, so it has no config or info schema")
    try:
        if validate_config(key, {}) != config_defaults(key):
            raise _Failed("the config schema's defaults do not validate to themselves")
    except ConfigError as exc:
        raise _Failed(f"the config schema refuses its own defaults: {exc}") from exc
    policy = make_random_policy(seed=0)
    steps = 0
    for seed in range(seeds):
        result = run_episode(env, policy, seed=seed)
        for i, info in enumerate(result.infos):
            _check_info(key, info, f"seed {seed}, step {i}")
        steps += len(result.infos)
    return (
        f"config defaults validate; {steps} infos of {seeds} random episodes follow envs/{key}.info"
    )


def _trace(env: TextEnv, seed: int, actions: list[Any]) -> list[Any]:
    obs, _ = env.reset(seed=seed)
    out: list[Any] = [obs]
    for action in actions:
        obs, reward, terminated, truncated, _ = env.step(action)
        out.append((obs, float(reward), bool(terminated), bool(truncated)))
        if terminated or truncated:
            break
    return out


def _reproducible(factory: Callable[[], TextEnv], seeds: int) -> str:
    a, b = factory(), factory()
    for seed in range(seeds):
        a.reset(seed=seed)
        rng = np.random.default_rng(seed)
        actions = [a.sample_action(rng) for _ in range(8)]
        first, second = _trace(a, seed, actions), _trace(b, seed, actions)
        if first != second:
            raise _Failed(
                f"seed {seed}: two fresh envs give different episodes for the same actions"
            )
        if _trace(a, seed, actions) != first:
            raise _Failed(f"seed {seed}: a second reset(seed={seed}) of the same env differs")
    return f"seeds 0-{seeds - 1}: same observations and rewards in fresh and reused envs"


def _splits(factory: Callable[[], TextEnv], seeds: int, config: dict[str, Any]) -> str:
    env = factory()
    if "split" not in getattr(env, "config", {}):
        return "skip:the env has no split field"
    cls, conf = type(env), {k: v for k, v in env.config.items() if k != "split"}
    firsts: dict[str, set[str]] = {}
    for split in ("train", "validation", "test"):
        try:
            split_env = cls(**{**conf, "split": split})
        except (ConfigError, ValueError) as exc:
            return f"skip:split {split!r} cannot be built here ({exc})"
        firsts[split] = {split_env.reset(seed=s)[0] for s in range(seeds)}
    if firsts["train"] == firsts["validation"] == firsts["test"]:
        return "skip:split does not change the instances (a fixed instance set)"
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        shared = firsts[a] & firsts[b]
        if shared:
            sample = next(iter(shared))[:80]
            raise _Failed(
                f"{len(shared)} first observations appear in both {a} and {b}: {sample!r}"
            )
    return f"first observations of seeds 0-{seeds - 1} share nothing between train, validation and test"


def _bad_actions(factory: Callable[[], TextEnv], seeds: int) -> str:
    env = factory()
    key = getattr(env, "env_key", "")
    for action in (*FUZZ_ACTIONS, *NON_STRING_ACTIONS):
        env.reset(seed=0)
        try:
            obs, reward, terminated, truncated, info = env.step(action)
        except Exception as exc:  # noqa: BLE001 - any exception is the failure reported
            raise _Failed(f"step({action!r:.40}) raised {type(exc).__name__}: {exc}") from exc
        if not isinstance(obs, str) or not isinstance(reward, (int, float)):
            raise _Failed(
                f"step({action!r:.40}) returned {type(obs).__name__}, {type(reward).__name__}"
            )
        if not math.isfinite(float(reward)) or not isinstance(terminated, bool):
            raise _Failed(
                f"step({action!r:.40}) returned reward {reward!r}, terminated {terminated!r}"
            )
        _check_info(key, info, f"step({action!r:.40})")
        if not isinstance(action, str) and info["action_is_valid"] is not False:
            raise _Failed(f"the non-string action {action!r} was taken as valid")
    return f"{len(FUZZ_ACTIONS)} malformed strings and {len(NON_STRING_ACTIONS)} non-strings: typed steps, no exception"


def _oracle(factory: Callable[[], TextEnv], seeds: int) -> str:
    env = factory()
    exact = getattr(env, "oracle_is_exact", True)
    try:
        env.reset(seed=0)
        env.oracle_actions()
    except NotImplementedError:
        return "skip:the env has no oracle (TextEnv.oracle_actions)"
    wins = 0
    for seed in range(seeds):
        result = run_episode(env, oracle_policy, seed=seed)
        wins += bool(result.success)
        if exact and not result.success:
            raise _Failed(f"seed {seed}: the oracle ended with {result.status}, not success")
        expected = env.optimal_return() if exact else None
        if expected is not None and not math.isclose(result.episode_return, expected, abs_tol=1e-9):
            raise _Failed(
                f"seed {seed}: oracle return {result.episode_return} != optimal_return {expected}"
            )
    if not wins:
        raise _Failed(f"the oracle never succeeded on seeds 0-{seeds - 1}")
    return f"the oracle succeeded on {wins} of {seeds} seeds" + ("" if exact else " (not exact)")


def check_env(
    env_or_id: Any, *, seeds: int = 5, config: dict[str, Any] | None = None
) -> CheckReport:
    """Run the generic contract on an environment.

    Args:
        env_or_id: a registered id (``"ragen/Sokoban-v0"``), an entry point
            ``"module:Class"``, a :class:`~ragen_envs.TextEnv` subclass, or an instance
            (its class and config are reused; the instance itself is not stepped).
        seeds: seeds per check (0 to ``seeds - 1``).
        config: config overrides for every env the checks build.

    Returns:
        A :class:`CheckReport` with one check each for ``gymnasium`` (Gymnasium's own
        checker, warnings as errors), ``schemas`` (config defaults and every info of random
        episodes follow the env's JSON Schemas), ``reproducible`` (the same seed and
        actions give the same episode in fresh and reused envs), ``splits`` (no first
        observation in two splits), ``bad actions`` (malformed and non-string actions
        are typed, schema-valid steps, never exceptions; non-strings are invalid) and
        ``oracle`` (the oracle succeeds and scores ``optimal_return`` when exact).
        A check that raises is a failure with the exception as its detail.

    Raises:
        ValueError: an entry point that cannot be imported, or ``seeds`` below 1;
        ragen_envs.UnknownEnvError: an unknown id (with close matches); ConfigError: a
        config the env refuses; TypeError: ``env_or_id`` of another type.
    """
    if seeds < 1:
        raise ValueError(f"seeds must be >= 1, got {seeds}")
    conf = dict(config or {})
    factory = _load(env_or_id, conf)
    probe = factory()  # an unknown id or a bad config raises here, before any check
    label = env_or_id if isinstance(env_or_id, str) else type(probe).__name__
    report = CheckReport(str(label))
    steps: list[tuple[str, Callable[[], str]]] = [
        ("gymnasium", lambda: _gymnasium(factory, seeds)),
        ("schemas", lambda: _schemas(factory, seeds)),
        ("reproducible", lambda: _reproducible(factory, seeds)),
        ("splits", lambda: _splits(factory, seeds, conf)),
        ("bad actions", lambda: _bad_actions(factory, seeds)),
        ("oracle", lambda: _oracle(factory, seeds)),
    ]
    for name, run in steps:
        try:
            detail = run()
        except _Failed as exc:
            report.checks.append(Check(name, "fail", str(exc)))
        except Exception as exc:  # noqa: BLE001 - a crash of the env is a failed check
            where = traceback.extract_tb(exc.__traceback__)[-1]
            report.checks.append(
                Check(
                    name, "fail", f"{type(exc).__name__}: {exc} ({where.filename}:{where.lineno})"
                )
            )
        else:
            status, _, text = (
                detail.partition(":") if detail.startswith("skip:") else ("pass", "", detail)
            )
            report.checks.append(Check(name, status, text))
    return report
