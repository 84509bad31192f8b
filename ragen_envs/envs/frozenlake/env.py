"""The FrozenLake text environment (spec: ``docs/envs/frozenlake.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...config import ConfigError
from ...core import TextEnv, Transition, join_lines
from ...seeding import in_split, sample_instance
from .dynamics import ACTIONS, Dynamics, build_dynamics, solve
from .maps import GOAL, STANDARD_MAPS, FrozenMap, random_map_attempt
from .render import LEGEND, render

#: Generator attempts per reset before :class:`~ragen_envs.seeding.GenerationError`
#: (with ``p >= 0.5`` and a split of 10% an attempt succeeds with probability well above
#: 1e-3, so the bound is never reached in practice).
MAX_ATTEMPTS = 10_000


class FrozenLakeEnv(TextEnv):
    """Walk across a frozen lake from the start to the goal without falling into a hole.

    Config (``ragen_envs/envs/frozenlake/config.schema.json``): ``split``, ``max_steps``
    (100), ``invalid_action_reward`` (-0.1), ``observation_format`` (grid | coord |
    grid_coord), ``size`` (4), ``p`` (0.9, probability that a random tile is frozen),
    ``success_rate`` (1.0), ``map_name`` (null | "4x4" | "8x8": Gymnasium's fixed maps),
    ``desc`` (null | list of rows in ``S F H G`` letters: a fixed custom map).

    Actions ``Left``, ``Down``, ``Right``, ``Up`` (case-insensitive).  Dynamics and
    rewards: :mod:`ragen_envs.envs.frozenlake.dynamics`; the table is
    :attr:`transitions`.  ``success`` = the player stands on the goal.

    ``info`` after reset: ``map`` (rows in ``S F H G``), ``start`` and ``goal`` as
    ``[row, col]``, ``generation_attempts``.  After a step: ``position`` ``[row, col]``;
    on a valid action also ``action`` (canonical name), ``direction`` (direction actually
    moved; differs from ``action`` when the ice was slippery), ``slipped``.

    Raises:
        ConfigError: both ``map_name`` and ``desc`` set, or ``desc`` is not a valid map.
    """

    env_key = "frozenlake"
    action_names = ACTIONS
    #: The base seed is drawn from a pure-Python copy of the seeded PCG64
    #: (TextEnv.lazy_seeding): no NumPy generator is built for it.
    lazy_seeding = True
    #: A slip is a random outcome (TextEnv.stochastic_outcomes; config ``outcomes``).
    stochastic_outcomes = True

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        c = self.config
        if c["map_name"] is not None and c["desc"] is not None:
            raise ConfigError(self.env_key, "desc", "set either map_name or desc, not both")
        self._fixed: FrozenMap | None = None
        if c["desc"] is not None:
            try:
                self._fixed = FrozenMap(tuple(c["desc"]))
            except ValueError as exc:
                raise ConfigError(self.env_key, "desc", str(exc)) from None
        elif c["map_name"] is not None:
            self._fixed = FrozenMap(STANDARD_MAPS[c["map_name"]])
        self._success_rate = float(c["success_rate"])
        #: True when the lake is deterministic: the oracle's plan then always succeeds.
        #: With ``success_rate < 1`` the oracle maximises the success probability but
        #: cannot guarantee success.
        self.oracle_is_exact: bool = self._success_rate >= 1.0
        self._map: FrozenMap | None = None
        self._dyn: Dynamics | None = None
        self._state = 0
        self._attempts = 1

    # ------------------------------------------------------------ instance
    def _generate(self) -> tuple[FrozenMap, int]:
        size, p, split = int(self.config["size"]), float(self.config["p"]), self.config["split"]

        def build(rng):
            fmap = random_map_attempt(rng, size, p)
            return fmap if fmap is not None and in_split(fmap.key(), split) else None

        return sample_instance(self._rng(), build, max_attempts=MAX_ATTEMPTS)

    def _reset(self, options: Mapping[str, Any]) -> None:
        if self._fixed is not None:
            self._map, self._attempts = self._fixed, 1
        else:
            self._map, self._attempts = self._generate()
        # The transition table is built on first use (a step, the oracle, ``dynamics``):
        # it was ~60% of an 8x8 reset under cProfile (build_dynamics, 4 x 64 entries).
        self._dyn = None
        self._state = self._map.start

    def _reset_info(self) -> dict[str, Any]:
        m = self.lake
        return {
            "map": list(m.rows),
            "start": list(m.coords(m.start)),
            "goal": list(m.coords(m.goal)),
            "generation_attempts": self._attempts,
        }

    # --------------------------------------------------------------- views
    @property
    def lake(self) -> FrozenMap:
        """The current map (after ``reset``)."""
        if self._map is None:
            raise RuntimeError("call reset() first")
        return self._map

    @property
    def transitions(self) -> tuple[tuple[tuple[tuple[float, int, float, bool], ...], ...], ...]:
        """Transition table ``P[s][a] = ((prob, next_state, reward, terminated), ...)`` of
        the current map, Gymnasium's layout (see :mod:`.dynamics`); states are
        ``row * ncol + col``, actions ``0 Left, 1 Down, 2 Right, 3 Up``."""
        return self.dynamics.transitions

    @property
    def dynamics(self) -> Dynamics:
        """The current :class:`~.dynamics.Dynamics` (table plus the direction of each entry),
        built on first use after a reset (:func:`~.dynamics.build_dynamics`, cached per map)."""
        dyn = self._dyn
        if dyn is None:
            dyn = self._dyn = build_dynamics(self.lake, self._success_rate)
        return dyn

    @property
    def state(self) -> int:
        """The player's state index ``row * ncol + col``."""
        return self._state

    # ---------------------------------------------------------------- step
    def _step(self, action: str) -> Transition:
        m = self.lake
        name = self.match_action(action)
        if name is None:
            return self.invalid(
                f"unknown action: expected one of {list(ACTIONS)}",
                position=list(m.coords(self._state)),
            )
        a = ACTIONS.index(name)
        entries = self.dynamics.transitions[self._state][a]
        dirs = self.dynamics.directions[self._state][a]
        u = float(
            self._outcome_rng().random()
        )  # one draw per valid step (Gymnasium's categorical_sample)
        k, acc = len(entries) - 1, 0.0
        for i, (prob, *_rest) in enumerate(entries):
            acc += prob
            if u < acc:
                k = i
                break
        _, nxt, reward, terminated = entries[k]
        moved = nxt != self._state
        self._state = nxt
        direction = ACTIONS[dirs[k]]
        return Transition(
            reward=float(reward),
            terminated=bool(terminated),
            action_is_effective=moved,
            success=m.tile(nxt) == GOAL,
            info={
                "action": name,
                "direction": direction,
                "slipped": direction != name,
                "position": list(m.coords(nxt)),
            },
        )

    def _observation(self) -> str:
        return render(self.lake, self._state, self.config["observation_format"])

    @property
    def instruction(self) -> str:
        p = self._success_rate
        fmt = self.config["observation_format"]
        if p >= 1.0:
            slip = "The ice is not slippery: every action moves you exactly as intended."
        else:
            side = (1.0 - p) / 2.0
            slip = (
                f"The ice is slippery: an action moves you in the intended direction with probability {p:.4g}"
                f" and in each of the two perpendicular directions with probability {side:.4g};"
                " you never move backwards."
            )
        return join_lines(
            [
                "You are on a frozen lake. Walk to the goal without falling into a hole.",
                "Symbols: " + ", ".join(f"{sym} = {text}" for sym, text in LEGEND) + ".",
                None
                if fmt == "grid"
                else "Coordinates are (row, col), counted from 0, row 0 at the top.",
                "Actions: Left, Down, Right, Up (case-insensitive). Each action moves you one cell;"
                " walking into the edge of the lake leaves you where you are.",
                slip,
                "Reaching the goal gives reward 1 and ends the game; falling into a hole ends it with reward 0.",
                "Answer with one or more actions separated by ||, for example <answer>Left || Down</answer>.",
            ]
        )

    # -------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """The optimal policy's actions from the current state (:func:`.dynamics.solve`).

        Deterministic lake (``success_rate == 1``): the whole remaining shortest plan.
        Slippery lake: one action, the policy's choice in the current state (the agent
        must observe where it slipped to).  ``[]`` once the episode is over.
        """
        if self.status.is_terminal:
            return []
        sol = solve(self.lake, self._success_rate)
        if not self.oracle_is_exact:
            return [ACTIONS[int(sol.policy[self._state])]]
        plan: list[str] = []
        s, seen = self._state, set()
        P = self.dynamics.transitions
        while s not in seen:
            seen.add(s)
            a = int(sol.policy[s])
            plan.append(ACTIONS[a])
            _, s, _, terminated = P[s][a][0]
            if terminated:
                break
        return plan

    def optimal_return(self) -> float:
        """Maximum (expected) return of the current instance from its start.

        Deterministic lake: 1.0 when a breadth-first search finds a hole-free path from
        start to goal (always, for generated and standard maps), else 0.0.  Slippery
        lake: ``V*(start)``, the maximum probability of reaching the goal (expected
        return) over an unbounded horizon; the ``max_steps`` truncation can only lower it.
        """
        m = self.lake
        if self.oracle_is_exact:
            return 1.0 if m.has_path() else 0.0
        return float(solve(m, self._success_rate).values[m.start])
