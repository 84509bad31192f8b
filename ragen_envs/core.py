"""The text-environment base class and the shared episode vocabulary.

Every ragen environment subclasses :class:`TextEnv`, a :class:`gymnasium.Env` whose
observations and actions are strings (:class:`~ragen_envs.spaces.UnicodeText`).
Subclasses implement four hooks:

* ``_reset(options) -> None`` builds the instance from ``self.np_random`` (or from
  ``self._rng()``, the same draws without building a NumPy generator, in an env that
  sets ``lazy_seeding``; see :mod:`ragen_envs.pcg64`);
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
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium.error import ResetNeeded

from .config import validate_config
from .pcg64 import PCG64Stream, seeded_stream
from .seeding import derive_seed
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


@dataclass(slots=True, init=False)
class Transition:
    """What one action did, as reported by :meth:`TextEnv._step`.

    Attributes:
        reward: scalar reward in the env's documented units (stored as ``float``).
        terminated: the MDP reached a terminal state (solved, failed).
        action_is_valid: the action parsed under the env's action grammar.
        action_is_effective: the action changed the state.
        success: the task is solved (only meaningful when ``terminated``).
        info: extra, env-specific ``info`` entries (must match the env's info schema).
        observation: the observation after the action when the env already has it
            (it must equal what ``_observation()`` would return); ``None`` (default):
            :meth:`TextEnv.step` calls ``_observation()``.
        template: set by :meth:`reusable`: the step ``info`` with ``status``, ``step``
            and ``episode_return`` left to fill in; ``None`` otherwise.
        first_step: set by :meth:`reusable` for a terminal transition:
            ``(info, status, episode_return)`` when it is the first step of an episode
            (``step`` 1, ``episode_return`` = ``0.0 + reward``); ``None`` otherwise.

    The constructor normalises the types once (``float`` reward, ``bool`` flags), so
    :meth:`TextEnv.step` can use the fields as they are and an env may build a
    transition once and return it again for the same outcome (Bandit does).  A
    transition is read, never modified, by the base class; its ``info`` is copied into
    the step's ``info``.
    """

    reward: float
    terminated: bool
    action_is_valid: bool
    action_is_effective: bool
    success: bool
    info: dict[str, Any]
    observation: str | None
    template: dict[str, Any] | None
    first_step: tuple[dict[str, Any], EpisodeStatus, float] | None

    def __init__(
        self,
        reward: float,
        terminated: bool = False,
        action_is_valid: bool = True,
        action_is_effective: bool = True,
        success: bool = False,
        info: dict[str, Any] | None = None,
        observation: str | None = None,
    ) -> None:
        self.reward = float(reward)
        self.terminated = bool(terminated)
        self.action_is_valid = bool(action_is_valid)
        self.action_is_effective = bool(action_is_effective)
        self.success = bool(success)
        self.info = {} if info is None else info
        self.observation = observation
        self.template = None
        self.first_step = None

    def reusable(self) -> Transition:
        """Mark this transition as one the env returns again for the same outcome.

        Precomputes the step ``info`` (base keys in their order, then :attr:`info`) so
        :meth:`TextEnv.step` only copies it and fills in ``status``, ``step`` and
        ``episode_return``; a terminal transition also gets :attr:`first_step`, the
        whole ``info`` (and status, return) of the first step of an episode, which an
        env that ends episodes in one step can return as a copy (Bandit does).  Neither
        the transition nor its ``info`` may change afterwards.  Returns ``self``.
        """
        self.template = {
            "action_is_valid": self.action_is_valid,
            "action_is_effective": self.action_is_effective,
            "success": self.success,
            "status": None,
            "step": None,
            "episode_return": None,
            **self.info,
        }
        if self.terminated:  # TextEnv.step's rules with step 1 after a reset (return 0.0)
            status = EpisodeStatus.SUCCESS if self.success else EpisodeStatus.FAILURE
            ret = 0.0 + self.reward
            self.first_step = (
                {**self.template, "status": status.value, "step": 1, "episode_return": ret},
                status,
                ret,
            )
        return self


_RUNNING = EpisodeStatus.RUNNING
_SUCCESS = EpisodeStatus.SUCCESS
_FAILURE = EpisodeStatus.FAILURE
_STEP_LIMIT = EpisodeStatus.STEP_LIMIT

#: The longest action :meth:`TextEnv.step` parses, in characters (64 Ki).  A longer
#: action is an invalid action (``invalid_reason`` names the limit; the env's
#: ``invalid_action_reward``, i.e. its format penalty) and is never parsed, so no parser
#: can be driven into long work or an exception by sheer length.  It is far above what
#: any env's grammar needs (a DeepCoder program of 64 Ki characters is ~16 k tokens).
MAX_ACTION_LENGTH = 1 << 16


class TextEnv(gym.Env[str, str]):
    """Base class of all ragen environments (Gymnasium 5-tuple API, text spaces).

    Class attributes to set in subclasses:
        env_key: the config/schema key, e.g. ``"sokoban"``; the config schema is
            ``ragen_envs/envs/<env_key>/config.schema.json`` and the info schema
            ``ragen_envs/envs/<env_key>/info.schema.json``.

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

    #: The episode state every ``step`` reads and writes, held in slots: a slot is a
    #: fixed field of the instance itself, next to its header, where an attribute in the
    #: instance ``__dict__`` sits in a separately allocated value array, one more cache
    #: line for a step that meets cold caches (as a rollout step does after the model's
    #: turn).  Instances still have a ``__dict__`` (``gym.Env`` has no slots) for
    #: everything else; ``copy``/``pickle`` carry slots (``object.__getstate__``).
    __slots__ = (
        "_status",
        "_steps",
        "_return",
        "_live",
        "_ready",
        "_max_steps",
        "_stream",
        "_gen",
        "_outcome_key",
        "_outcome_gen",
    )

    metadata: dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}
    env_key: ClassVar[str] = ""
    #: Longest action parsed, in characters; longer ones are invalid (see :meth:`step`).
    max_action_length: ClassVar[int] = MAX_ACTION_LENGTH
    #: ``reset(seed=k)`` keeps the seeded generator as a :class:`~ragen_envs.pcg64.PCG64Stream`
    #: (``self._stream``) and builds ``np_random`` from it only when asked (see
    #: :attr:`_np_random`); an env sets this when its hooks draw through :meth:`_rng`.
    lazy_seeding: bool = False
    #: Transitions draw random outcomes after the instance is built (a risky arm's payoff, a
    #: slip on ice, a new tile).  Such an env takes ``reset(options={"member": k})``: with
    #: its config's ``outcomes`` at ``"independent"`` (the default) member ``k`` of a group
    #: draws its outcomes from its own stream, keyed by ``(seed, k)``, while every member
    #: still gets the same instance; ``"shared"`` keeps RAGEN's behaviour (the instance's
    #: stream goes on, so members who act alike see the same outcomes).  See
    #: :meth:`_outcome_rng` and docs/envs/README.md ("Group members and random outcomes").
    stochastic_outcomes: ClassVar[bool] = False

    def __init__(self, render_mode: str | None = None, **config: Any):
        #: The episode's seeded stream while no NumPy generator was built from it.
        self._stream: PCG64Stream | None = None
        self._gen: np.random.Generator | None = None  # the generator (see _np_random)
        #: The seed of this member's outcome stream (None: outcomes come from _rng()).
        self._outcome_key: int | None = None
        self._outcome_gen: np.random.Generator | None = None  # built from it on first draw
        self._status = EpisodeStatus.RUNNING
        self._steps = 0
        self._return = 0.0
        #: ``_ready`` and the episode still running: the one flag ``step`` tests.
        self._live = False
        self._ready = False
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(
                f"render_mode must be one of {self.metadata['render_modes']} or None, got {render_mode!r}"
            )
        self.render_mode = render_mode
        self.config: dict[str, Any] = validate_config(self.env_key, config)
        self.observation_space: UnicodeText = UnicodeText(MAX_TEXT_LENGTH)
        self.action_space: UnicodeText = UnicodeText(self.max_action_length)
        self._max_action_length = int(self.max_action_length)
        self._lookup_names: object = ()  # match_action's table is for these names (none yet)
        self._lookup: dict[str, str] = {}

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

    def optimal_return(self) -> float | None:
        """The maximum return of the current instance from its start state, or ``None``
        when the env does not state one (this default; e.g. Bandit, whose reward is a draw).

        An env that states it must have an oracle that earns exactly it on every instance
        (unless the env sets ``oracle_is_exact = False``): the generic sweep
        (``tests/envs/test_env_api.py``) checks that for every registered id.
        """
        return None

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
        not exactly one of the names (with several names equal up to case, the first).
        One dict look-up per call: the table is rebuilt only when ``action_names`` is
        replaced by another object.
        """
        names = self.action_names
        if names is not self._lookup_names:
            self._lookup_names = names
            fold: dict[str, str] = {}
            for name in names or ():
                fold.setdefault(name.casefold(), name)
            self._lookup = {**fold, **{name: fold[name.casefold()] for name in names or ()}}
        found = self._lookup.get(action)
        if found is None:
            found = self._lookup.get(action.strip().casefold())
        return found

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
    @property
    def _np_random(self) -> np.random.Generator | None:  # type: ignore[override]
        """Gymnasium's generator slot, through which its ``np_random`` reads and writes.

        With :attr:`lazy_seeding`, ``reset(seed=k)`` seeds a pure-Python
        :class:`~ragen_envs.pcg64.PCG64Stream` instead (the same PCG64 state Gymnasium's
        ``np_random(k)`` has, drawn from identically); the first read here builds the
        ``Generator`` at the stream's current position and drops the stream, so every
        later draw goes through the generator.  Writing (Gymnasium's ``reset`` and
        ``np_random`` setter) drops the stream too.
        """
        gen = self._gen
        if gen is None and self._stream is not None:
            gen = self._gen = self._stream.generator()
            self._stream = None
        return gen

    @_np_random.setter
    def _np_random(self, value: np.random.Generator | None) -> None:
        self._stream = None
        self._gen = value

    def _rng(self) -> PCG64Stream | np.random.Generator:
        """What a hook draws from: the seeded stream while it is live, else :attr:`np_random`
        (both give the same draws; see :mod:`ragen_envs.pcg64`)."""
        stream = self._stream
        return self.np_random if stream is None else stream

    def _outcome_rng(self) -> PCG64Stream | np.random.Generator:
        """What a stochastic transition draws from: this group member's own outcome stream
        after ``reset(options={"member": k})`` of an env with independent outcomes (a NumPy
        ``Generator`` on PCG64, seeded with :func:`~ragen_envs.seeding.derive_seed` of
        ``("outcomes", env_key, seed, k)``, so the same in any process), else :meth:`_rng` (the
        instance's stream, continued: RAGEN's shared outcomes, and every plain reset)."""
        key = self._outcome_key
        if key is None:
            return self._rng()
        gen = self._outcome_gen
        if gen is None:
            gen = self._outcome_gen = np.random.Generator(np.random.PCG64(key))
        return gen

    def _member_outcomes(self, member: int | None) -> None:
        """Key this episode's outcome stream by ``(seed, member)`` (see :meth:`_outcome_rng`)."""
        self._outcome_gen = None
        if member is None or not self.stochastic_outcomes or self.config["outcomes"] == "shared":
            self._outcome_key = None
            return
        seed = getattr(self, "_np_random_seed", None)
        seed = None if seed is None else int(seed)
        self._outcome_key = derive_seed("outcomes", self.env_key, seed, member)

    def _seed_generator(self, seed: int | None) -> None:
        """Gymnasium's seeding for ``reset(seed=seed)``; with :attr:`lazy_seeding` a
        non-negative int seed gives a :class:`~ragen_envs.pcg64.PCG64Stream`."""
        if self.lazy_seeding and type(seed) is int and seed >= 0:
            self._gen = None
            self._stream = seeded_stream(seed)
            self._np_random_seed = seed  # SeedSequence(seed).entropy
        elif seed is not None:
            super().reset(seed=seed)
        elif self._stream is None:
            self.np_random  # noqa: B018 - a generator when no seed was ever given

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start a new episode.

        Args:
            seed: instance seed; ``reset(seed=i)`` gives the same instance in any
                process.  ``None`` continues the current random stream.
            options: env-specific reset options (documented on each spec page), and
                ``member``: the episode's index within its group (an int >= 0), which
                keys the outcome stream of an env with :attr:`stochastic_outcomes`
                (ignored by the others).

        Returns:
            ``(observation, info)``.

        Raises:
            ValueError: ``options["member"]`` is not a non-negative int.
        """
        member = None
        if options and "member" in options:
            options = dict(options)
            member = options.pop("member")
            if type(member) is not int or member < 0:
                raise ValueError(f"reset option 'member' must be an int >= 0, got {member!r}")
        self._seed_generator(seed)
        self._steps = 0
        self._return = 0.0
        self._status = EpisodeStatus.RUNNING
        self._member_outcomes(member)
        self._reset(options or {})
        self._max_steps = int(
            self.config["max_steps"]
        )  # after _reset: an env may derive it from the instance
        self._ready = self._live = True
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
        ``invalid_action_reward`` and the step counts toward ``max_steps``.  An action
        longer than :attr:`max_action_length` characters (default
        :data:`MAX_ACTION_LENGTH`) is invalid without being parsed.  ``bytes`` are
        decoded as UTF-8 (undecodable bytes replaced); any other non-string is invalid.

        Returns:
            ``(observation, reward, terminated, truncated, info)``.

        Raises:
            gymnasium.error.ResetNeeded: before the first ``reset`` or after the
                episode ended.
        """
        if not self._live:
            self._refuse_step()
        if type(action) is str and len(action) <= self._max_action_length:
            tr = self._step(action)
        else:
            tr = self._step_irregular(action)
        steps = self._steps = self._steps + 1
        reward = tr.reward
        ret = self._return = self._return + reward
        terminated = tr.terminated
        truncated = False
        if terminated:
            status = self._status = _SUCCESS if tr.success else _FAILURE
            self._live = False
        elif steps >= self._max_steps:
            truncated = True
            status = self._status = _STEP_LIMIT
            self._live = False
        else:
            status = _RUNNING
        template = tr.template
        if template is None:
            info = {
                "action_is_valid": tr.action_is_valid,
                "action_is_effective": tr.action_is_effective,
                "success": tr.success,
                "status": status._value_,
                "step": steps,
                "episode_return": ret,
                **tr.info,
            }
        else:  # a reusable transition: same keys, same order
            info = template.copy()
            info["status"] = status._value_
            info["step"] = steps
            info["episode_return"] = ret
        obs = tr.observation
        return self._observation() if obs is None else obs, reward, terminated, truncated, info

    # The uncommon branches of ``step``, kept out of its common path.
    def _refuse_step(self) -> None:
        if not self._ready:
            raise ResetNeeded("call reset() before step()")
        raise ResetNeeded(f"the episode has ended ({self._status.value}); call reset()")

    def _step_irregular(self, action: Any) -> Transition:
        """``_step`` for a non-``str`` or over-long action (see :meth:`step`)."""
        if isinstance(action, (bytes, bytearray)):
            action = action.decode("utf-8", errors="replace")
        elif isinstance(action, str):
            action = str(action)
        else:
            return self.invalid(f"action must be a string, got {type(action).__name__}")
        if len(action) > self.max_action_length:
            return self.invalid(
                f"action is {len(action)} characters long; the limit is {self.max_action_length}"
            )
        return self._step(action)

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


def raw_uniform(rng: np.random.Generator) -> Callable[[], int] | None:
    """The raw 64-bit draw behind ``rng.random()``, when the bit generator is PCG64.

    For numpy's PCG64 (the bit generator of Gymnasium's ``np_random``),
    ``Generator.random()`` is ``(next64 >> 11) * 2**-53`` (numpy
    ``random/src/pcg64/pcg64.h``, ``pcg64_next_double``) and ``bit_generator.random_raw()``
    returns that same ``next64``, advancing the same state.  With
    :func:`raw_threshold`, ``raw() < raw_threshold(p)`` is therefore exactly the event
    ``rng.random() < p`` and leaves the generator where ``rng.random()`` would have
    (tested in ``tests/envs/test_env_speed_paths.py``), at a third of the cost (no float
    conversion, no argument parsing).  Returns ``None`` for any other bit generator:
    use ``rng.random()`` then.
    """
    bg = raw_bit_generator(rng)
    return None if bg is None else bg.random_raw


def raw_bit_generator(rng: np.random.Generator) -> np.random.PCG64 | None:
    """``rng``'s bit generator when it is PCG64 (``bg.random_raw()`` is then the draw of
    :func:`raw_uniform`; holding ``bg`` instead of that bound method saves an object per
    episode), else ``None``."""
    bg = rng.bit_generator
    return bg if type(bg) is np.random.PCG64 else None


def raw_threshold(p: float) -> int | None:
    """The integer ``t`` with ``raw < t`` iff ``(raw >> 11) * 2**-53 < p`` for every 64-bit ``raw``.

    ``(raw >> 11) * 2**-53 < p`` iff ``raw >> 11 < p * 2**53`` (scaling by a power of
    two is exact) iff ``raw >> 11 < ceil(p * 2**53)`` (an integer side) iff
    ``raw < ceil(p * 2**53) * 2**11``.  ``None`` for a non-finite ``p``.
    """
    if not math.isfinite(p):
        return None
    return math.ceil(p * 9007199254740992.0) << 11


def join_lines(lines: Sequence[str | None]) -> str:
    """Join instruction lines with newlines, dropping ``None`` entries."""
    return "\n".join(line for line in lines if line is not None)
