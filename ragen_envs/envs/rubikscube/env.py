"""The 2x2x2 Rubik's Cube text environment (spec: ``docs/envs/rubikscube.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ...config import ConfigError
from ...core import TextEnv, Transition, join_lines
from ...seeding import in_split, sample_instance
from . import cube, solver
from .cube import ACTIONS, INVERSE, SOLVED, apply, check_state, is_solved, parse_state, render_net

#: Generator attempts per reset.  An attempt fails when its scramble leaves the cube
#: solved or lands in another split; with 10% splits the bound is never reached.
MAX_ATTEMPTS = 1_000


def scramble(rng: Any, depth: int) -> tuple[bytes, list[str]]:
    """``depth`` random quarter turns from the solved cube (white up, green front).

    Turn ``k`` is uniform over the twelve actions except the inverse of turn ``k - 1``
    (so no turn undoes the one before it); one ``rng.integers`` draw per turn.

    Returns:
        ``(state, turns)``.
    """
    state = SOLVED
    turns: list[str] = []
    for _ in range(depth):
        options = [a for a in ACTIONS if not turns or a != INVERSE[turns[-1]]]
        name = options[int(rng.integers(len(options)))]
        state = apply(state, name)
        turns.append(name)
    return state, turns


class RubiksCubeEnv(TextEnv):
    """Solve a scrambled 2x2x2 Rubik's Cube with quarter turns.

    Config (``ragen_envs/envs/rubikscube/config.schema.json``): ``split``, ``max_steps``
    (20, RAGEN's), ``invalid_action_reward`` (-0.1), ``scramble_depth`` (1, RAGEN's
    default: random quarter turns, see :func:`scramble`), ``solved_reward`` (1.0),
    ``initial_state`` (``null`` or 24 sticker letters: play that state every episode
    instead of scrambles).

    Actions ``U U' D D' L L' R R' F F' B B'`` (case-insensitive; ``X'`` is the
    counterclockwise turn, also written ``Xi`` or with a typographic apostrophe).  The
    reward is ``solved_reward`` on the turn that solves the cube (every face one
    colour), which terminates the episode with success, else 0 (RAGEN's reward,
    RAGEN-AI/RAGEN ragen/env/).  Invalid actions: state unchanged, ``invalid_action_reward``.

    ``info`` after reset: ``state`` (24 sticker letters), ``optimal_distance``,
    ``scramble`` (the turns; empty for ``initial_state``), ``generation_attempts``.
    After a step: ``state``, ``distance`` (optimal turns left), and ``action``
    (canonical name) on a valid action.

    The oracle (:func:`.solver.solve`) returns an optimal plan: its length equals
    ``optimal_distance``.

    Raises:
        ConfigError: ``initial_state`` is malformed or not reachable by turns (sticker
            counts, impossible or mirrored corners, a twisted corner), or already solved.
    """

    env_key = "rubikscube"
    action_names = ACTIONS

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        self._fixed: bytes | None = None
        if self.config["initial_state"] is not None:
            try:
                state = parse_state(self.config["initial_state"])
                check_state(state)
            except ValueError as exc:
                raise ConfigError(self.env_key, "initial_state", str(exc)) from None
            if is_solved(state):
                raise ConfigError(self.env_key, "initial_state", "the cube is already solved")
            self._fixed = state
        aliases = {a.casefold(): a for a in ACTIONS}
        for a in ACTIONS:
            if a.endswith("'"):
                for alt in ("i", "\u2019", "\u2032", "`"):
                    aliases[(a[0] + alt).casefold()] = a
        self._aliases = aliases
        self._state = SOLVED
        self._scramble: list[str] = []
        self._attempts = 1

    # ------------------------------------------------------------ instance
    def _reset(self, options: Mapping[str, Any]) -> None:
        if self._fixed is not None:
            self._state, self._scramble, self._attempts = self._fixed, [], 1
            return
        depth, split = int(self.config["scramble_depth"]), self.config["split"]

        def build(rng):
            state, turns = scramble(rng, depth)
            return None if is_solved(state) or not in_split(state, split) else (state, turns)

        (self._state, self._scramble), self._attempts = sample_instance(
            self.np_random, build, max_attempts=MAX_ATTEMPTS
        )

    def _reset_info(self) -> dict[str, Any]:
        return {
            "state": self.sticker_text,
            "optimal_distance": solver.distance(self._state),
            "scramble": list(self._scramble),
            "generation_attempts": self._attempts,
        }

    @property
    def state(self) -> bytes:
        """The 24 sticker colours (indices into :data:`.cube.COLOURS`), sticker order U L F R B D."""
        return self._state

    @property
    def sticker_text(self) -> str:
        """The state as 24 letters (the format ``initial_state`` accepts)."""
        return "".join(cube.COLOURS[c] for c in self._state)

    # ---------------------------------------------------------------- step
    def invalid(self, reason: str, **info: Any) -> Transition:
        """An invalid action's transition, with ``state`` and ``distance`` in ``info``.

        Every invalid step carries them — also an over-long or non-string action, which
        the base class refuses before :meth:`_step`.
        """
        return super().invalid(
            reason, state=self.sticker_text, distance=solver.distance(self._state), **info
        )

    def _step(self, action: str) -> Transition:
        name = self._aliases.get(action.strip().casefold())
        if name is None:
            return self.invalid(f"unknown action: expected one of {' '.join(ACTIONS)}")
        self._state = apply(self._state, name)
        solved = is_solved(self._state)
        return Transition(
            reward=float(self.config["solved_reward"]) if solved else 0.0,
            terminated=solved,
            success=solved,
            info={
                "action": name,
                "state": self.sticker_text,
                "distance": solver.distance(self._state),
            },
        )

    def _observation(self) -> str:
        return render_net(self._state)

    @property
    def instruction(self) -> str:
        names = ", ".join(f"{c} = {n}" for c, n in zip(cube.COLOURS, cube.COLOUR_NAMES))
        return join_lines(
            [
                "You are solving a scrambled 2x2x2 Rubik's Cube. It is solved when every face shows a single colour.",
                "The observation is the unfolded cube, one letter per sticker:",
                "the Up face on top; below it, left to right, the Left, Front, Right and Back faces; the Down face at"
                " the bottom. Each face is drawn as seen from outside the cube (Up with Back at its top edge, Down with"
                " Front at its top edge).",
                f"Colours: {names}.",
                "Actions: U, D, L, R, F, B turn that face a quarter turn clockwise as seen looking at the face;"
                " U', D', L', R', F', B' turn it counterclockwise.",
                f"Solving the cube gives reward {self.config['solved_reward']:g} and ends the game;"
                " every other turn gives 0.",
                "Answer with one or more actions separated by ||, for example <answer>R || U'</answer>.",
            ]
        )

    # -------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """An optimal solution from the current state (:func:`.solver.solve`); ``[]`` once over."""
        if self.status.is_terminal:
            return []
        return solver.solve(self._state)

    def optimal_return(self) -> float:
        """``solved_reward``: the oracle always solves within ``max_steps`` when
        ``optimal_distance <= max_steps`` (every preset; God's number is 14)."""
        return float(self.config["solved_reward"])
