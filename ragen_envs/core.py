"""The text-environment base class and the shared episode vocabulary.

Every ragen environment subclasses :class:`TextEnv`, a :class:`gymnasium.Env` whose
observations and actions are strings (:class:`~ragen_envs.spaces.UnicodeText`).
Subclasses implement four hooks:

* ``_reset(options) -> None`` builds the instance from ``self.np_random``;
* ``_step(action: str) -> Transition`` applies one action;
* ``_observation() -> str`` renders the current state;
* ``instruction`` (property) is the task text the agent needs: rules, action
  grammar and an answer example, kept separate from the observation.

and may provide ``action_names`` (a discrete action vocabulary), ``oracle_actions()``
and ``sample_action(rng)``.  The base class does the bookkeeping that must be the
same everywhere: seeding, step counting, truncation at ``max_steps``, invalid-action
handling for non-string actions, the ``info`` contract and the typed episode status.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from .config import validate_config
from .spaces import MAX_TEXT_LENGTH, UnicodeText


class EpisodeStatus(str, enum.Enum):
    """Why an episode ended (or that it has not).

    The environment itself produces ``running``, ``success``, ``failure`` and
    ``step_limit``; the agent loop in ``ragen_bench`` adds the statuses that only it
    can observe (turn budget, invalid answers, context window, endpoint and
    environment errors).  The value is what ``info["status"]`` and result files hold.
    """

    RUNNING = "running"
    #: terminated with the task solved.
    SUCCESS = "success"
    #: terminated without solving the task (hole, wrong final answer, ...).
    FAILURE = "failure"
    #: truncated by the environment's ``max_steps``.
    STEP_LIMIT = "step_limit"
    #: the agent loop ran out of turns.
    TURN_LIMIT = "turn_limit"
    #: the agent loop stopped after too many consecutive invalid answers.
    INVALID_FORMAT_LIMIT = "invalid_format_limit"
    #: the conversation no longer fits the model's context window.
    CONTEXT_LIMIT = "context_limit"
    #: the environment raised an exception.
    ENV_ERROR = "env_error"
    #: the policy endpoint failed after its retry budget.
    ENDPOINT_ERROR = "endpoint_error"

    @property
    def is_terminal(self) -> bool:
        """True for every status except ``running``."""
        return self is not EpisodeStatus.RUNNING

    def __str__(self) -> str:
        return self.value


@dataclass
class Transition:
    """What one action did, as reported by :meth:`TextEnv._step`.

    Attributes:
        reward: scalar reward in the env's documented units.
        terminated: the MDP reached a terminal state (solved, failed).
        action_is_valid: the action parsed under the env's action grammar.
        action_is_effective: the action changed the state.
        success: the task is solved (only meaningful when ``terminated``).
        info: extra, env-specific ``info`` entries (must match the env's info schema).
    """

    reward: float
    terminated: bool = False
    action_is_valid: bool = True
    action_is_effective: bool = True
    success: bool = False
    info: dict[str, Any] = field(default_factory=dict)


class TextEnv(gym.Env[str, str]):
    """Base class of all ragen environments (Gymnasium 5-tuple API, text spaces).

    Class attributes to set in subclasses:
        env_key: the config/schema key, e.g. ``"sokoban"``; the config schema is
            ``schemas/envs/<env_key>.config.schema.json`` and the info schema
            ``schemas/envs/<env_key>.info.schema.json``.

    Args:
        render_mode: ``None`` or ``"ansi"`` (``render()`` returns the observation).
        **config: environment config; validated against the env's JSON Schema with
            defaults filled in (see :func:`ragen_envs.config.validate_config`).

    Raises:
        ConfigError: a config field is unknown, missing or out of range.

    ``info`` after ``reset`` and every ``step`` always holds ``action_is_valid``,
    ``action_is_effective``, ``success``, ``status`` (an :class:`EpisodeStatus`
    value), ``step`` (actions taken so far) and ``episode_return``.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": ["ansi"], "render_fps": 4}
    env_key: ClassVar[str] = ""

    def __init__(self, render_mode: str | None = None, **config: Any):
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.config: dict[str, Any] = validate_config(self.env_key, config)
        self.observation_space = UnicodeText(MAX_TEXT_LENGTH)
        self.action_space = UnicodeText(MAX_TEXT_LENGTH)
        self._status = EpisodeStatus.RUNNING
        self._steps = 0
        self._return = 0.0
        self._ready = False

    # ------------------------------------------------------------------ hooks
    def _reset(self, options: Mapping[str, Any]) -> None:  # pragma: no cover - abstract
        raise NotImplementedError

    def _step(self, action: str) -> Transition:  # pragma: no cover - abstract
        raise NotImplementedError

    def _observation(self) -> str:  # pragma: no cover - abstract
        raise NotImplementedError

    def _reset_info(self) -> dict[str, Any]:
        """Extra ``info`` entries after reset (env-specific)."""
        return {}

    @property
    def instruction(self) -> str:  # pragma: no cover - abstract
        """The task text for the agent: rules, action grammar, an answer example."""
        raise NotImplementedError

    #: Discrete action vocabulary (canonical spelling), or ``None`` for free-form actions.
    action_names: tuple[str, ...] | None = None

    def oracle_actions(self) -> list[str]:
        """Actions an optimal policy takes next from the current state.

        Deterministic environments return the whole remaining plan; stochastic ones
        return one action (the policy must observe the outcome).  An empty list means
        the episode is over or the oracle has nothing to add.
        """
        raise NotImplementedError(f"{type(self).__name__} has no oracle")

    def sample_action(self, rng: np.random.Generator) -> str:
        """A uniformly random *well-formed* action (the random baseline).

        Default: uniform over :attr:`action_names`.
        """
        if not self.action_names:
            raise NotImplementedError(f"{type(self).__name__} must implement sample_action")
        return self.action_names[int(rng.integers(len(self.action_names)))]

    # ------------------------------------------------------- helpers for hooks
    def match_action(self, action: str) -> str | None:
        """Map ``action`` to its canonical name in :attr:`action_names`, case-insensitively.

        Leading and trailing whitespace is ignored.  Returns ``None`` when the text is
        not exactly one of the names.
        """
        names = self.action_names or ()
        key = action.strip().casefold()
        for name in names:
            if name.casefold() == key:
                return name
        return None

    def invalid(self, reason: str, **info: Any) -> Transition:
        """The transition for an invalid action: state unchanged, ``invalid_action_reward``."""
        return Transition(
            reward=float(self.config.get("invalid_action_reward", -0.1)),
            terminated=False,
            action_is_valid=False,
            action_is_effective=False,
            success=False,
            info={"invalid_reason": reason, **info},
        )

    # --------------------------------------------------------- Gymnasium API
    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None) -> tuple[str, dict[str, Any]]:
        """Start a new episode.

        Args:
            seed: instance seed; ``reset(seed=i)`` gives the same instance in any
                process.  ``None`` continues the current random stream.
            options: env-specific reset options (documented on each spec page).

        Returns:
            ``(observation, info)``.
        """
        super().reset(seed=seed)
        self._steps = 0
        self._return = 0.0
        self._status = EpisodeStatus.RUNNING
        self._reset(options or {})
        self._ready = True
        info = {
            "action_is_valid": True,
            "action_is_effective": False,
            "success": False,
            "status": self._status.value,
            "step": 0,
            "episode_return": 0.0,
        }
        info.update(self._reset_info())
        return self._observation(), info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """Apply one action.

        Any string is accepted; one that does not parse under the env's action grammar
        is an invalid action: the state is unchanged, the reward is the config's
        ``invalid_action_reward`` and the step counts toward ``max_steps``.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.

        Raises:
            gymnasium.error.ResetNeeded: before the first ``reset`` or after the
                episode ended.
        """
        if not self._ready:
            raise ResetNeeded("call reset() before step()")
        if self._status.is_terminal:
            raise ResetNeeded(f"the episode has ended ({self._status.value}); call reset()")
        if isinstance(action, (bytes, bytearray)):
            action = action.decode("utf-8", errors="replace")
        if isinstance(action, str):
            tr = self._step(action)
        else:
            tr = self.invalid(f"action must be a string, got {type(action).__name__}")
        self._steps += 1
        reward = float(tr.reward)
        self._return += reward
        terminated = bool(tr.terminated)
        truncated = (not terminated) and self._steps >= int(self.config["max_steps"])
        if terminated:
            self._status = EpisodeStatus.SUCCESS if tr.success else EpisodeStatus.FAILURE
        elif truncated:
            self._status = EpisodeStatus.STEP_LIMIT
        info = {
            "action_is_valid": bool(tr.action_is_valid),
            "action_is_effective": bool(tr.action_is_effective),
            "success": bool(tr.success),
            "status": self._status.value,
            "step": self._steps,
            "episode_return": self._return,
        }
        info.update(tr.info)
        return self._observation(), reward, terminated, truncated, info

    def render(self) -> str | None:
        """The current observation text when ``render_mode == "ansi"``."""
        if self.render_mode == "ansi":
            return self._observation() if self._ready else ""
        return None

    # ------------------------------------------------------------ read-only
    @property
    def status(self) -> EpisodeStatus:
        """The current :class:`EpisodeStatus`."""
        return self._status

    @property
    def num_steps(self) -> int:
        """Actions taken in the current episode."""
        return self._steps

    @property
    def episode_return(self) -> float:
        """Sum of rewards in the current episode."""
        return self._return


def join_lines(lines: Sequence[str]) -> str:
    """Join instruction lines with newlines, dropping ``None`` entries."""
    return "\n".join(line for line in lines if line is not None)
