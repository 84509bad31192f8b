"""The Sokoban text environment (spec: ``docs/envs/sokoban.md``)."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from ...config import ConfigError
from ...core import TextEnv, Transition, join_lines
from ...seeding import sample_instance
from .generator import fallback_possible, fallback_room, generate_room
from .level_sets import load_level_source
from .render import grid_template, legend, render, resolve_vocab
from .reverse import optimal_distance as reverse_distance
from .room import (
    ACTION_NAMES,
    BOX_OFF_TARGET_REWARD,
    BOX_ON_TARGET_REWARD,
    FINISHED_REWARD,
    STEP_REWARD,
    Puzzle,
    apply_action,
    step_reward,
)
from .solver import solve
from .xsb import XSBError


@functools.lru_cache(maxsize=256)
def _level_distance(puzzle: Puzzle, max_states: int) -> int | None:
    """Optimal distance of a fixed level's start state by reverse play (memoised)."""
    return reverse_distance(puzzle.layout, puzzle.player, puzzle.boxes, max_states=max_states)


_ACTION_INDEX = {name: i for i, name in enumerate(ACTION_NAMES)}


class SokobanEnv(TextEnv):
    """Sokoban: push every box onto a target (gym-sokoban physics and rewards).

    Config (``ragen_envs/envs/sokoban/config.schema.json``): ``split``, ``max_steps`` (100),
    ``invalid_action_reward`` (-0.1), ``observation_format`` (``grid`` | ``coord`` |
    ``grid_coord``), ``dim_room`` ([6, 6]), ``num_boxes`` (1), ``search_depth`` (300),
    ``max_search_states`` (100000), ``max_generation_attempts`` (400), ``grid_vocab``
    (symbol table; partial tables overlay RAGEN's defaults), ``levels`` (``None`` or an
    XSB source, see :mod:`.level_sets`), ``solver_max_nodes`` (2000000).

    Actions: ``Up``, ``Down``, ``Left``, ``Right`` (case-insensitive).  Rewards per step
    (mpSchrader/gym-sokoban; RAGEN-AI/RAGEN ``ragen/env/sokoban/``): -0.1, +1 box onto a
    target, -1 box off a target, +10 and termination when every box is on a target.

    Reset options: ``{"level": i}`` plays fixed level ``i`` (only with ``levels``).
    With ``levels`` and no option, ``reset(seed=s)`` plays level ``s mod N``.

    ``info`` after reset: ``generation_attempts``, ``fallback_instance``,
    ``optimal_distance`` (steps of a shortest solution when known at reset),
    ``level_index`` / ``level_title`` (fixed levels), ``num_boxes``, ``boxes_on_target``.
    After a step: ``pushed`` and ``boxes_on_target``.

    Raises:
        ConfigError: bad config (schema), a ``grid_vocab`` with repeated symbols,
            ``num_boxes`` too large for ``dim_room``, or unreadable ``levels``.
    """

    env_key = "sokoban"
    action_names = ACTION_NAMES

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode, **config)
        cfg = self.config
        try:
            self._vocab = resolve_vocab(cfg["grid_vocab"])
        except ValueError as exc:
            raise ConfigError(self.env_key, "grid_vocab", str(exc)) from None
        self._levels: tuple[Puzzle, ...] | None = None
        if cfg["levels"] is not None:
            try:
                self._levels = load_level_source(cfg["levels"])
            except (XSBError, OSError) as exc:
                raise ConfigError(self.env_key, "levels", str(exc)) from None
            for i, lvl in enumerate(self._levels):
                if lvl.is_solved:
                    raise ConfigError(self.env_key, "levels", f"level {i + 1} is already solved")
        else:
            h, w = cfg["dim_room"]
            if not fallback_possible(h, w, cfg["num_boxes"]):
                raise ConfigError(
                    self.env_key,
                    "num_boxes",
                    f"{cfg['num_boxes']} boxes do not fit a {h}x{w} room "
                    f"(at most max(dim_room) - 2 = {max(h, w) - 2})",
                )
        self._puzzle: Puzzle | None = None
        self._player = 0
        self._boxes: set[int] = set()
        self._seed_arg: int | None = None
        self._plan_key: tuple[int, tuple[int, ...]] | None = None
        self._plan: list[str] = []
        self._format = cfg["observation_format"]
        self._template: list[str] = []

    # --------------------------------------------------------------- reset
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """Start an episode (see :meth:`TextEnv.reset`); the seed also picks the fixed level."""
        self._seed_arg = seed
        return super().reset(seed=seed, options=options)

    def _reset(self, options: Mapping[str, Any]) -> None:
        cfg = self.config
        self._fallback = False
        self._attempts = 1
        self._level_index: int | None = None
        if self._levels is not None:
            n = len(self._levels)
            if "level" in options:
                idx = options["level"]
                if not isinstance(idx, int) or isinstance(idx, bool) or not 0 <= idx < n:
                    raise ValueError(f"options['level'] must be an int in [0, {n}), got {idx!r}")
            elif self._seed_arg is not None:
                idx = int(self._seed_arg) % n
            else:
                idx = int(self.np_random.integers(n))
            self._level_index = idx
            self._puzzle = self._levels[idx]
            self._distance: int | None = None  # computed on demand (optimal_return)
        else:
            h, w = cfg["dim_room"]
            nb = cfg["num_boxes"]
            max_distance = min(int(cfg["search_depth"]), int(cfg["max_steps"]))

            def build(rng):
                return generate_room(
                    rng,
                    height=h,
                    width=w,
                    num_boxes=nb,
                    max_distance=max_distance,
                    max_states=int(cfg["max_search_states"]),
                    split=cfg["split"],
                )

            room, self._attempts = sample_instance(
                self.np_random,
                build,
                max_attempts=int(cfg["max_generation_attempts"]),
                fallback=lambda: fallback_room(h, w, nb, cfg["split"]),
            )
            self._puzzle = room.puzzle
            self._distance = room.optimal_distance
            self._fallback = room.fallback
        self._player = self._puzzle.player
        self._boxes = set(self._puzzle.boxes)
        self._plan_key = None
        self._template = grid_template(self._puzzle.layout, self._vocab)

    def _reset_info(self) -> dict[str, Any]:
        pz = self._puzzle
        assert pz is not None
        return {
            "generation_attempts": self._attempts,
            "fallback_instance": self._fallback,
            "optimal_distance": self._distance,
            "level_index": self._level_index,
            "level_title": None if self._level_index is None else pz.title,
            "num_boxes": pz.num_boxes,
            "boxes_on_target": self._on_target(),
        }

    # ---------------------------------------------------------------- step
    def _on_target(self) -> int:
        assert self._puzzle is not None
        return len(self._boxes & self._puzzle.layout.target_set)

    def _step(self, action: str) -> Transition:
        pz = self._puzzle
        assert pz is not None
        name = self.match_action(action)
        if name is None:
            return self.invalid(
                "not an action: expected one of Up, Down, Left, Right",
                pushed=False,
                boxes_on_target=self._on_target(),
            )
        move = apply_action(pz.layout, self._player, self._boxes, _ACTION_INDEX[name])
        self._player = move.player
        on = self._on_target()
        solved = on == pz.num_boxes
        return Transition(
            reward=step_reward(pz.layout, move, solved),
            terminated=solved,
            action_is_effective=move.moved,
            success=solved,
            info={"pushed": move.box_from >= 0, "boxes_on_target": on},
        )

    # ------------------------------------------------------------- render
    def _observation(self) -> str:
        assert self._puzzle is not None
        return render(
            self._format,
            self._puzzle.layout,
            self._player,
            self._boxes,
            self._vocab,
            self._template,
        )

    @property
    def instruction(self) -> str:
        fmt = self.config["observation_format"]
        lines = [
            "You are playing Sokoban. You are the player in a warehouse on a grid; "
            "push every box onto a target.",
            "Rules:",
            "- Each action moves you one cell: Up (row - 1), Down (row + 1), Left (column - 1) "
            "or Right (column + 1).",
            "- Moving into a box pushes it one cell further in the same direction, but only if "
            "that cell is free (no wall and no other box). You cannot pull a box or push two "
            "boxes at once.",
            "- Moving into a wall, or into a box that cannot move, does nothing.",
            f"- Rewards: {STEP_REWARD:g} for every action, +{BOX_ON_TARGET_REWARD:g} when a box is "
            f"pushed onto a target, {BOX_OFF_TARGET_REWARD:g} when a box is pushed off a target, "
            f"+{FINISHED_REWARD:g} when every box is on a target, which ends the game. "
            f"The game stops after {self.config['max_steps']} actions.",
        ]
        if fmt in ("grid", "grid_coord"):
            lines.append(f"The meaning of each symbol in the grid: {legend(self._vocab)}.")
        if fmt in ("coord", "grid_coord"):
            lines.append(
                "Positions are (row, column), zero-indexed from the top-left cell. "
                "'Targets' lists every target, 'Boxes' every box, and 'Boxes on target' "
                "the boxes already on a target."
            )
        lines += [
            f"The available actions are: {', '.join(ACTION_NAMES)}.",
            "You may give several actions in one answer, separated by ||; they are carried out in order.",
            "Answer example: <answer>Up || Left</answer>",
        ]
        return join_lines(lines)

    # -------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """The whole remaining optimal plan from the current state (A*, :mod:`.solver`).

        Returns ``[]`` when the episode is over or the state is dead (no plan exists,
        e.g. after a random policy pushed a box into a corner).

        Raises:
            SolverBudgetExceeded: more than ``solver_max_nodes`` expansions.
        """
        if self.status.is_terminal or self._puzzle is None:
            return []
        key = (self._player, tuple(sorted(self._boxes)))
        if key != self._plan_key:
            plan = solve(
                self._puzzle.layout, key[0], key[1], max_nodes=int(self.config["solver_max_nodes"])
            )
            self._plan = [] if plan is None else [ACTION_NAMES[a] for a in plan]
            self._plan_key = key
        return list(self._plan)

    def optimal_return(self) -> float | None:
        """Maximum return of the current instance from its start state.

        Independent of the oracle: the optimal solution length ``d`` comes from the
        generator's reverse breadth-first search (fixed levels: the same search run
        until the start state is found, memoised).  Any successful episode of ``L``
        steps earns ``-0.1 L``, ``+10`` once, and ``+1`` per landing and ``-1`` per
        departure of boxes on targets, which telescope to ``N - k0`` (``N`` boxes,
        ``k0`` of them on a target at the start).  Hence the maximum return is
        ``10 + (N - k0) - 0.1 d``, reached exactly by shortest plans; a truncated
        episode earns less.

        Returns ``None`` when ``d`` is unknown (search budget), ``d > max_steps``, or
        ``invalid_action_reward > 0`` (invalid actions would then pay).
        """
        pz = self._puzzle
        if pz is None or float(self.config["invalid_action_reward"]) > 0:
            return None
        d = self._distance
        if d is None and self._levels is not None:
            d = _level_distance(pz, int(self.config["solver_max_nodes"]))
        if d is None or d > int(self.config["max_steps"]):
            return None
        k0 = len(set(pz.boxes) & pz.layout.target_set)
        return FINISHED_REWARD + BOX_ON_TARGET_REWARD * (pz.num_boxes - k0) + STEP_REWARD * d

    # ----------------------------------------------------------- accessors
    @property
    def puzzle(self) -> Puzzle | None:
        """The current instance (layout and start state), ``None`` before the first reset."""
        return self._puzzle

    @property
    def state(self) -> tuple[int, tuple[int, ...]]:
        """The current ``(player, sorted boxes)`` as flat indices."""
        return self._player, tuple(sorted(self._boxes))
