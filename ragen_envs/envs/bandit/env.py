"""Two-armed bandit with meaningful arm names (spec: ``docs/envs/bandit.md``).

The agent sees two arms named after occupations or strategies, one *steady* (a small
sure payoff) and one *risky* (a large payoff with a small probability, higher in mean
and in variance), and must pull the arm with the higher expected reward, reasoning only
from the names.  Default payoffs follow RAGEN's code (arXiv 2504.20073, Bandit env):
steady arm 0.1 always; risky arm 1.0 with probability 0.25, else 0 (mean 0.25,
variance 0.1875).

Seeds and groups: the arm pair and the order in which the two names are presented are
a function of the seed only, so every member of a GRPO group (same seed) sees the same
pair in the same order (RAGEN's per-instance counter breaks this).

Splits (``split_by``):

* ``"names"`` (default, RAGEN's Bandit / BanditTest protocol): train, validation and
  test use disjoint *names*, so a test instance asks the agent to reason about names
  it never saw in training;
* ``"pairs"``: every steady name can meet every risky name (24 × 24 pairings from the
  union of the lists); each *pairing* belongs to exactly one split by the keyed hash of
  ``ragen_envs.seeding.instance_split``.  Test instances are new combinations of known
  names: this measures whether a policy learned which names are risky, independently of
  what it is paired with (``ragen/Bandit-Pairs-v0``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from ...core import EpisodeStatus, TextEnv, Transition, join_lines, raw_threshold
from ...pcg64 import PCG64Stream, seeded_first, seeded_stream
from ...seeding import in_split, sample_instance

#: (steady arm, risky arm) name pairs per split; no name appears in two splits.
ARM_PAIRS: dict[str, tuple[tuple[str, str], ...]] = {
    "train": (
        ("Librarian", "Gambler"),
        ("Accountant", "Treasure Hunter"),
        ("Postman", "Day Trader"),
        ("Baker", "Gold Prospector"),
        ("Clerk", "Lottery Player"),
        ("Pharmacist", "Startup Founder"),
        ("Savings Account", "Slot Machine"),
        ("Bus Driver", "Poker Player"),
        ("Tailor", "Oil Wildcatter"),
        ("Farmer", "Storm Chaser"),
        ("Government Bond", "Penny Stock"),
        ("Cashier", "Bounty Hunter"),
    ),
    "validation": (
        ("Dentist", "Venture Capitalist"),
        ("Index Fund", "Crypto Token"),
        ("Plumber", "Fortune Seeker"),
        ("Nurse", "Deep-Sea Diver"),
    ),
    "test": (
        ("Teacher", "Pirate"),
        ("Certificate of Deposit", "Horse Race Bet"),
        ("Electrician", "Pearl Diver"),
        ("Payroll Officer", "Film Producer"),
        ("Fixed Salary", "Commission-Only Sales"),
        ("Mail Carrier", "Meteorite Hunter"),
        ("Insurance Agent", "Professional Gamer"),
        ("Utility Stock", "Casino Roulette"),
    ),
}


#: Action names in ``answer_with="label"`` mode (arm shown first is A).
LABELS = ("A", "B")

_THRESHOLDS: dict[int | None, int | None] = {}
_RUNNING = EpisodeStatus.RUNNING


def _shared(threshold: int | None) -> int | None:
    """One int object per coin threshold for all envs (a step reads no per-env copy)."""
    return _THRESHOLDS.setdefault(threshold, threshold)


#: One outcome of a pull, ``(observation, reward, info, status, episode_return, transition)``:
#: ``info``, ``status`` and ``episode_return`` are the whole first step of an episode
#: (:attr:`~ragen_envs.core.Transition.first_step`), the transition serves later steps.
Outcome = tuple[str, float, dict[str, Any], EpisodeStatus, float, Transition]

#: What pulling one arm does: ``(is_risky, outcome unpaid, outcome paid)``.
Pull = tuple[bool, Outcome, Outcome]


class BanditEnv(TextEnv):
    """Two-armed bandit; actions are the two arm names (case-insensitive).

    Config (``ragen_envs/envs/bandit/config.schema.json``): ``split``, ``split_by``,
    ``answer_with`` (``"name"``: the action is the arm's name; ``"label"``: the arms are
    shown as ``A: <name>``, ``B: <name>`` and the action is the letter, a multiple-choice
    answer that needs no copying of names), ``max_steps``
    (default 3: invalid answers may be retried; the first pull ends the episode),
    ``steady_reward`` (0.1), ``risky_reward`` (1.0), ``risky_prob`` (0.25),
    ``invalid_action_reward`` (-0.1).

    ``info`` on a pull: ``arm`` (the name pulled), ``chose_best`` (pulled the
    higher-mean arm).  ``success`` equals ``chose_best``.
    """

    env_key = "bandit"

    #: Draw through a pure-Python copy of the seeded PCG64 (TextEnv.lazy_seeding).
    lazy_seeding = True
    #: The risky arm's payoff is a random outcome (TextEnv.stochastic_outcomes; ``outcomes``).
    stochastic_outcomes = True

    #: What :meth:`step`'s first-step path reads and writes besides TextEnv's episode
    #: state (also slots): fields of the instance itself, no value-array look-ups.
    __slots__ = ("_pending", "_raw_threshold", "_last", "_scratch", "_fast")

    def __init__(self, render_mode: str | None = None, **config: Any):
        #: The pull table while the episode's first action is still to come, else None
        #: (:meth:`step`'s fast path; never set when the coin has no raw threshold).
        self._pending: dict[str, Pull] | None = None
        self._raw_threshold: int | None = None  # set from the validated config below
        self._last: str | None = None
        self._scratch = np.zeros(1, dtype=np.uint32)  # seeded_first's, this env's own
        #: ``(split, answer_with, starts, pairs)`` of the last direct reset (:meth:`reset`).
        self._fast: tuple[Any, Any, list[tuple[Any, ...]], int] = (None, None, [], 0)
        super().__init__(render_mode, **config)
        c = self.config
        self._risky_prob = float(c["risky_prob"])
        self._payoffs = (float(c["steady_reward"]), float(c["risky_reward"]), self._risky_prob)
        self._raw_threshold = _shared(raw_threshold(self._risky_prob))

    def _means(self) -> tuple[float, float]:
        c = self.config
        return float(c["steady_reward"]), float(c["risky_reward"]) * float(c["risky_prob"])

    def _reset(self, options: Mapping[str, Any]) -> None:
        self._pending = None
        split = self.config["split"]
        rng = self._rng()
        if self.config["split_by"] == "names":
            pairs = ARM_PAIRS[split]
            steady, risky = pairs[int(rng.integers(len(pairs)))]
            swap = bool(rng.integers(2))
        else:
            steadies = [p[0] for s in ARM_PAIRS.values() for p in s]
            riskies = [p[1] for s in ARM_PAIRS.values() for p in s]

            def build(rng: np.random.Generator) -> tuple[str, str, bool] | None:
                a, b = (
                    steadies[int(rng.integers(len(steadies)))],
                    riskies[int(rng.integers(len(riskies)))],
                )
                return (
                    (a, b, bool(rng.integers(2)))
                    if in_split(f"bandit-pair|{a}|{b}", split)
                    else None
                )

            (steady, risky, swap), _ = sample_instance(rng, build, max_attempts=10_000)
        self._set_arms(steady, risky, swap)

    def _set_arms(self, steady: str, risky: str, swap: bool) -> None:
        """The episode's arms, names and pull table (all a function of the three)."""
        self._arms = (risky, steady) if swap else (steady, risky)
        labelled = self.config["answer_with"] == "label"
        self.action_names = LABELS if labelled else self._arms
        steady_mean, risky_mean = self._means()
        self._best = risky if risky_mean > steady_mean else steady
        self._steady, self._risky = steady, risky
        self._last = None
        self._pull_of = self._pull_table()
        # The fast first step draws the coin from the instance's stream: not for a member
        # with its own outcome stream (TextEnv._outcome_rng), whose pulls take _pull.
        fast = self._raw_threshold is not None and self._outcome_key is None
        self._pending = self._pull_of if fast else None

    def _reset_info(self) -> dict[str, Any]:
        return {"arms": list(self._arms)}

    #: (split, answer_with, payoffs) -> per ``2 * pair + swap``: what a ``names`` reset
    #: sets, ``(observation, info, arms, action names, best, steady, risky, pull table)``.
    _STARTS: ClassVar[dict[tuple[Any, ...], list[tuple[Any, ...]]]] = {}

    def _starts(self, split: str) -> list[tuple[Any, ...]]:
        """Every start of a ``names`` episode, built once per process by the general
        path's own code (:meth:`_set_arms`, :meth:`_observation`, :meth:`_reset_info`).

        Leaves the episode attributes of the last start built (the caller, :meth:`reset`,
        sets all of them next).  Nothing here reads ``self.__dict__``: that turns the
        instance's inline attribute values into a dict for good, after which every
        reset's attribute stores took ~4 % longer (thread time, alternating batches).
        """
        key = (split, self.config["answer_with"], self._payoffs, self._raw_threshold)
        starts = self._STARTS.get(key)
        if starts is None:
            starts = []
            for steady, risky in ARM_PAIRS[split]:
                for swap in (False, True):
                    self._set_arms(steady, risky, swap)
                    info = {
                        "action_is_valid": True,
                        "action_is_effective": False,
                        "success": False,
                        "status": EpisodeStatus.RUNNING.value,
                        "step": 0,
                        "episode_return": 0.0,
                        **self._reset_info(),
                    }
                    starts.append(
                        (self._observation(), info, self._arms, self.action_names)
                        + (self._best, self._steady, self._risky, self._pull_of)
                    )
            self._STARTS[key] = starts
        return starts

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """:meth:`TextEnv.reset`, with its common case taken directly: a seeded reset of
        a ``split_by="names"`` env.

        Profile (cProfile of 30,000 resets): Gymnasium's ``np_random(seed)`` was half a
        reset (NumPy's ``SeedSequence`` and ``PCG64`` construction), the two
        ``Generator.integers`` calls, the info dict and the observation text most of
        the rest.  Here the seed gives a :class:`~ragen_envs.pcg64.PCG64Stream` (the same
        state, hashed in blocks for sequential seeds), its two draws pick one of the
        precomputed starts (:meth:`_starts`), and the info is a copy with a fresh
        ``arms`` list.  Both paths give the same results, ``np_random`` included
        (``tests/envs/test_env_speed_paths.py``, ``tests/envs/test_reset_paths.py``).

        Seeds out of sequence (thread time of 20,000 resets:
        8.1 µs a reset, the pure-Python ``SeedSequence`` hash 5.1 µs of it): the seed
        is mixed by NumPy's ``SeedSequence`` in C (its ``pool``, ~2.2 µs with this
        env's one-element scratch array), one straight-line function finishes the
        PCG64 state and its first 64-bit draw (:func:`~ragen_envs.pcg64.seeded_first`,
        ~1.7 µs), and both start draws are taken from that draw here (what
        :meth:`~ragen_envs.pcg64.PCG64Stream.integers2` does); 6.1 µs a reset.
        """
        c = self.config
        if options or type(seed) is not int or seed < 0 or c["split_by"] != "names":
            return super().reset(seed=seed, options=options)
        split, answer_with = c["split"], c["answer_with"]
        fast_split, fast_answer, starts, n = self._fast
        if split != fast_split or answer_with != fast_answer:  # first reset, or config changed
            cached = self._STARTS.get((split, answer_with, self._payoffs, self._raw_threshold))
            starts = self._starts(split) if cached is None else cached
            n = len(starts) >> 1  # arm pairs
            self._fast = (split, answer_with, starts, n)
        self._gen = None  # TextEnv._seed_generator, inlined
        self._outcome_key = None  # TextEnv._member_outcomes(None), inlined
        self._np_random_seed = seed
        # PCG64Stream.integers2(n, 2) on the stream's first 64-bit draw, inlined
        state, inc, x = seeded_first(seed, self._scratch)
        pair = (x & 0xFFFFFFFF) * n
        if pair & 0xFFFFFFFF >= n:  # accepted at once (integers(2) never rejects: x >> 63)
            self._stream = PCG64Stream(state, inc, 0, x >> 32)
            start = starts[2 * (pair >> 32) + (x >> 63)]
        else:  # a Lemire rejection (probability below n / 2**32): one by one
            stream = self._stream = seeded_stream(seed)
            pair, swap = stream.integers2(n, 2)
            start = starts[2 * pair + swap]
        obs, info, arms, self.action_names, self._best, self._steady, self._risky, table = start
        self._arms = arms
        self._pull_of = table
        self._pending = table if self._raw_threshold is not None else None
        self._last = None
        self._steps = 0
        self._return = 0.0
        self._status = _RUNNING
        self._max_steps = int(c["max_steps"])
        self._ready = self._live = True
        info = info.copy()
        info["arms"] = list(arms)
        return obs, info

    def step(self, action: str) -> tuple[str, float, bool, bool, dict[str, Any]]:
        """:meth:`TextEnv.step`, with its common case taken directly: the first action
        of an episode, spelled as in the pull table (an arm's exact or casefolded name).

        That action ends the episode, so the result is fixed but for the coin: each
        outcome in the pull table carries its observation, reward and whole first-step
        ``info`` (:attr:`~ragen_envs.core.Transition.first_step`), and this does the base
        class's bookkeeping for a terminal first step inline (no further calls but the
        coin's draw and the ``info`` copy).  Anything else (a later step, another
        spelling, a non-string, an env whose ``np_random`` was built) goes through
        :meth:`TextEnv.step`; both paths give the same results
        (``tests/envs/test_env_speed_paths.py``).
        """
        table = self._pending
        stream = self._stream
        if table is not None and stream is not None and type(action) is str:
            pull = table.get(action)
            if pull is not None:
                risky, outcome, paid = pull
                # One uniform draw, as RAGEN's env does (np_random.random() < risky_prob),
                # decided on the same raw PCG64 output (core.raw_threshold).
                # (_pending is set only when _raw_threshold is an int: reset)
                if risky and stream.next64() < self._raw_threshold:  # type: ignore[operator]
                    outcome = paid
                obs, reward, info, status, ret, _ = outcome
                self._pending = None
                self._last = obs
                self._live = False
                self._steps = 1
                self._return = ret
                self._status = status
                return obs, reward, True, False, info.copy()
        self._pending = None
        return super().step(action)

    def _pull(self, pull: Pull) -> Transition:
        """Pull an arm (the general path): its :class:`Transition`; draws the risky arm's coin."""
        risky, outcome, paid = pull
        if risky:
            # One uniform draw, as RAGEN's env does: np_random.random() < risky_prob, or
            # the same event decided on the raw PCG64 output (core.raw_threshold); a
            # member with independent outcomes draws from its own stream.
            stream, t = self._stream, self._raw_threshold
            if (
                self._outcome_rng().random() < self._risky_prob
                if self._outcome_key is not None
                else stream.next64() < t
                if stream is not None and t is not None
                else self.np_random.random() < self._risky_prob
            ):
                outcome = paid
        self._last = outcome[0]
        return outcome[5]

    def _step(self, action: str) -> Transition:
        pull = self._pull_of.get(action)
        if pull is None:
            pull = self._pull_of.get(action.strip().casefold())
            if pull is None:
                self._last = None
                what = "label" if self.action_names == LABELS else "arm name"
                return self.invalid(
                    f"not an {what}: expected one of {list(self.action_names or ())}"
                )
        return self._pull(pull)

    #: (arms, action names, payoffs) -> {action text: pull}; see :meth:`_pull_table`.
    _PULL_TABLES: ClassVar[dict[tuple[Any, ...], dict[str, Pull]]] = {}

    def _pull_table(self) -> dict[str, Pull]:
        """Action text -> what pulling that arm does, ``(is_risky, unpaid, paid)`` with
        each outcome an :data:`Outcome`.

        Keyed by the canonical action spellings and their casefolded forms, so the common
        case (an exact name) costs one dict look-up; match_action's rule (strip,
        casefold) applies when it misses.  A pull's result depends only on the arm pair,
        the action names and the payoffs (which arm is better follows from them), so
        one table per such key is built and shared by every env of the process: the
        transitions are immutable (:meth:`~ragen_envs.core.Transition.reusable`), and a
        step touches the same few objects whichever env takes it.
        """
        key = (self._arms, self.action_names, self._payoffs, self._best)
        table = self._PULL_TABLES.get(key)
        if table is None:
            steady_reward, risky_reward, _ = self._payoffs
            table = {}
            assert self.action_names is not None  # _set_arms names the arms at every reset
            for name, arm in zip(self.action_names, self._arms):
                risky = arm == self._risky
                chose_best = arm == self._best
                unpaid, paid = (
                    (obs, tr.reward, *tr.first_step, tr)  # type: ignore[misc]  # terminal: set
                    for r in ((0.0, risky_reward) if risky else (steady_reward,) * 2)
                    for obs in (f"You pulled {arm} and received {r:g} points.",)
                    for tr in (
                        Transition(
                            reward=r,
                            terminated=True,
                            success=chose_best,
                            observation=obs,
                            info={"arm": arm, "chose_best": chose_best},
                        ).reusable(),
                    )
                )
                table[name] = table[name.casefold()] = (risky, unpaid, paid)
            self._PULL_TABLES[key] = table
        return table

    def _observation(self) -> str:
        if self._last is not None:
            return self._last
        a, b = getattr(self, "_arms", ("", ""))
        if self.action_names == LABELS:
            return f"Two arms are in front of you: A: {a}, B: {b}. Which arm do you pull?"
        return f"Two arms are in front of you: {a} and {b}. Which arm do you pull?"

    @property
    def instruction(self) -> str:
        a, b = getattr(self, "_arms", ("ArmA", "ArmB"))
        head = [
            "You are playing a two-armed bandit game.",
            "Each arm pays points drawn from its own fixed distribution, which you are not told;"
            " the name of each arm hints at how it behaves.",
            "Pull exactly one arm: choose the one you expect to pay more points on average.",
        ]
        if self.action_names == LABELS:
            return join_lines(
                head
                + [
                    f"The arms are labelled A ({a}) and B ({b}); the available actions are A, B.",
                    "Answer with the label of the arm, for example <answer>A</answer>.",
                ]
            )
        return join_lines(
            head
            + [
                f"The available actions are the arm names: {a}, {b}.",
                f"Answer with the arm name, for example <answer>{a}</answer>.",
            ]
        )

    def oracle_actions(self) -> list[str]:
        """Pull the higher-mean arm (maximises the expected return)."""
        if self.status.is_terminal:
            return []
        return (
            [LABELS[self._arms.index(self._best)]] if self.action_names == LABELS else [self._best]
        )

    def sample_action(self, rng: np.random.Generator) -> str:  # noqa: D102 - base doc
        return super().sample_action(rng)
