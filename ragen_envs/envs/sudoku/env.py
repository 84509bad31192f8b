"""The Sudoku text environment (spec: ``docs/envs/sudoku.md``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core import EpisodeStatus, TextEnv, Transition, join_lines
from ...seeding import GenerationError, attempt_stream, first_attempt, sample_instance
from . import four
from .generator import EMPTY_CELLS, Puzzle, generate_attempt
from .grid import Geometry, from_text, geometry
from .moves import Move, parse_move
from .render import render_fresh, render_grid
from .solver import SearchBudgetExceeded, solve

#: Generator attempts per reset (a 9x9 attempt fails only when its solution grid lies in
#: another split, about 20-90% of the time, so 200 attempts never run out in practice).
MAX_ATTEMPTS = 200

#: Node budget when checking a puzzle passed through ``reset(options={"puzzle": ...})``.
LOAD_BUDGET = 1_000_000

_FOUR = geometry(4)

#: The last-move line of a fresh episode's observation.
NO_MOVE_YET = "Last accepted move: none yet."

GRAMMAR_HINT = "expected 'place N at row R col C', 'R,C,N', '(R,C,N)' or 'clear row R col C'"


class SudokuEnv(TextEnv):
    """Fill a Sudoku grid; every move is checked against the rules.

    Config (``ragen_envs/envs/sudoku/config.schema.json``): ``split``, ``size`` (4 | 9),
    ``difficulty`` (easy | medium | hard: the number of empty cells, see
    :data:`.generator.EMPTY_CELLS`), ``max_steps`` (``null`` = twice the number of empty
    cells), ``invalid_action_reward`` (-0.1), ``placement_reward`` (1.0),
    ``completion_reward`` (10.0), ``placement_rule`` (``legal`` | ``correct``, see
    :meth:`_earns`).

    Reward table (per step):

    * placing a digit that breaks no rule (``placement_rule="correct"``: the solution's
      digit) into an empty cell that has not earned before in this episode:
      ``placement_reward``; into any other cell (overwrite, or a cell
      cleared earlier): 0 -- a cell earns at most once per episode, so no farming;
    * clearing a cell the agent filled: 0; a move that changes nothing (the same digit
      again, clearing an empty cell): 0, valid, not effective;
    * the move that completes the grid (all cells filled; rules hold by construction)
      also earns ``completion_reward`` and terminates with success;
    * invalid (grammar, out of range, given cell, row/column/box conflict):
      ``invalid_action_reward``, state unchanged; it counts toward ``max_steps``.

    Reset options: ``{"puzzle": text}`` plays a given puzzle (16 or 81 cells, digits and
    ``.``/``0``, whitespace ignored) instead of a generated one; it must have exactly one
    solution.

    ``info`` after reset: ``size``, ``empty_cells``, ``generation_attempts``.  After a
    step: ``empty_cells``; ``move`` (canonical text) when the move parsed; ``conflicts``
    (1-indexed ``[row, col]`` of the clashing digits) on a rule conflict.

    Raises (from ``reset``):
        ValueError: a puzzle passed in ``options`` is malformed or not uniquely solvable.
    """

    env_key = "sudoku"
    #: The base seed is drawn from a pure-Python copy of the seeded PCG64
    #: (TextEnv.lazy_seeding): no NumPy generator is built for it.
    lazy_seeding = True

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        self._auto_max_steps = self.config["max_steps"] is None
        self._g: Geometry = geometry(int(self.config["size"]))
        self._givens: tuple[int, ...] = ()
        self._solution: tuple[int, ...] = ()
        self._grid: list[int] = []
        self._earned: set[int] = set()
        self._attempts = 1
        self._last = ""
        self._obs: str | None = None  # cached observation text

    # ------------------------------------------------------------ instance
    def _reset(self, options: Mapping[str, Any]) -> None:
        if options.get("puzzle") is not None:
            puzzle = self._load(str(options["puzzle"]))
            self._attempts = 1
        else:
            n = int(self.config["size"])
            target = EMPTY_CELLS[n][self.config["difficulty"]]
            split = self.config["split"]
            puzzle, self._attempts = sample_instance(
                self._rng(),
                lambda rng: generate_attempt(rng, n, target, split),
                max_attempts=MAX_ATTEMPTS,
                streams=n == 4,  # 4x4 attempts run on pure-Python streams (generator.four)
            )
        self._g = geometry(puzzle.n)
        self._givens, self._solution = puzzle.givens, puzzle.solution
        self._grid = list(puzzle.givens)
        self._earned = set()
        self._obs = None
        self._last = NO_MOVE_YET
        if self._auto_max_steps:
            self.config["max_steps"] = max(2, 2 * puzzle.num_empty)

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[str, dict[str, Any]]:
        """:meth:`TextEnv.reset`, with its common case taken directly: a seeded reset of
        a 4x4 env (:attr:`lazy_seeding`, no options).

        Profile (thread time, 3,000 ``Sudoku-v0`` resets, seeds in sequence, 33.7 µs a
        reset): the attempt stream's three-word hash 6.3 µs an attempt (1.26 attempts a
        reset), the 4x4 attempt 10.9 µs an attempt (5.8 µs of it the stream's 32-bit
        draws), the seeded stream and base draw 2.1 µs, the grid text 2.3 µs, and
        ``TextEnv.reset`` / ``sample_instance`` / ``generate_attempt`` / ``Puzzle``
        bookkeeping the rest.  Here the seeded stream, base seed and attempt-0 stream
        come from :func:`ragen_envs.seeding.first_attempt` (blocks of sequential seeds
        hashed in NumPy), attempts run :func:`.four.attempt` directly, the text is
        :func:`.render.render_fresh`, and the episode state and ``info`` are set here.
        Same results as the general path, ``np_random`` included
        (``tests/envs/test_reset_paths.py``).

        Raises:
            GenerationError: no attempt of :data:`MAX_ATTEMPTS` succeeded (as
                :func:`ragen_envs.seeding.sample_instance`).
        """
        c = self.config
        if options or type(seed) is not int or seed < 0 or c["size"] != 4 or not self.lazy_seeding:
            return super().reset(seed=seed, options=options)
        target = EMPTY_CELLS[4][c["difficulty"]]
        split = c["split"]
        stream, base, attempt = first_attempt(seed)
        k = 0
        found = four.attempt(attempt, target, split)
        while found is None:
            k += 1
            if k == MAX_ATTEMPTS:
                raise GenerationError(
                    f"no valid instance after {MAX_ATTEMPTS} attempts (base seed {base})"
                )
            found = four.attempt(attempt_stream(base, k), target, split)
        self._gen = None  # TextEnv._seed_generator, inlined
        self._stream = stream
        self._np_random_seed = seed
        self._steps = 0
        self._return = 0.0
        self._status = EpisodeStatus.RUNNING
        givens, self._solution = found
        self._givens = givens
        self._attempts = k + 1
        self._g = _FOUR
        self._grid = list(givens)
        self._earned = set()
        self._last = NO_MOVE_YET
        if self._auto_max_steps:
            c["max_steps"] = max(2, 2 * target)
        self._max_steps = int(c["max_steps"])
        self._ready = self._live = True
        # target empty cells exactly: four.attempt empties num_empty cells or fails
        obs = self._obs = f"{render_fresh(givens)}\nEmpty cells: {target}.\n{NO_MOVE_YET}"
        return obs, {
            "action_is_valid": True,
            "action_is_effective": False,
            "success": False,
            "status": "running",
            "step": 0,
            "episode_return": 0.0,
            "size": 4,
            "empty_cells": target,
            "generation_attempts": k + 1,
        }

    @staticmethod
    def _load(text: str) -> Puzzle:
        givens = from_text(text)
        try:
            sols = solve(givens, limit=2, budget=LOAD_BUDGET)
        except SearchBudgetExceeded:
            raise ValueError("puzzle too hard to check for a unique solution") from None
        if len(sols) != 1:
            raise ValueError(
                f"a puzzle must have exactly one solution, this one has {'none' if not sols else 'several'}"
            )
        if all(givens):
            raise ValueError("the puzzle has no empty cell")
        return Puzzle(tuple(givens), tuple(sols[0]))

    def _reset_info(self) -> dict[str, Any]:
        return {
            "size": self._g.n,
            "empty_cells": self.empty_cells,
            "generation_attempts": self._attempts,
        }

    # --------------------------------------------------------------- views
    @property
    def grid(self) -> tuple[int, ...]:
        """Current digits, flat row-major (0 = empty)."""
        return tuple(self._grid)

    @property
    def givens(self) -> tuple[int, ...]:
        """The puzzle's givens, flat row-major (0 = empty)."""
        return self._givens

    @property
    def empty_cells(self) -> int:
        """Number of empty cells now."""
        return self._grid.count(0)  # the cells hold ints 0..n: one C scan

    def conflicts(self, cell: int, digit: int) -> list[int]:
        """Cells (flat indices) in the row, column or box of ``cell`` that hold ``digit``."""
        return [j for j in self._g.peers(cell) if self._grid[j] == digit]

    # ---------------------------------------------------------------- step
    def _invalid(self, reason: str, **info: Any) -> Transition:
        # The observation is left as it was (the project's invalid-action contract); the
        # reason travels in info["invalid_reason"].
        return self.invalid(reason, empty_cells=self.empty_cells, **info)

    def _step(self, action: str) -> Transition:
        move = parse_move(action)
        if move is None:
            return self._invalid(f"not a move: {GRAMMAR_HINT}")
        n = self._g.n
        if not (1 <= move.row <= n and 1 <= move.col <= n):
            return self._invalid(f"row and column must be between 1 and {n}", move=str(move))
        if move.digit is not None and not 1 <= move.digit <= n:
            return self._invalid(f"the digit must be between 1 and {n}", move=str(move))
        cell = self._g.index(move.row - 1, move.col - 1)
        where = f"row {move.row} col {move.col}"
        if self._givens[cell]:
            return self._invalid(f"{where} is a given and cannot be changed", move=str(move))
        if move.kind == "clear":
            return self._clear(move, cell)
        return self._place(move, cell, where)

    def _clear(self, move: Move, cell: int) -> Transition:
        effective = bool(self._grid[cell])
        self._grid[cell] = 0
        self._obs = None
        self._last = f"Last accepted move: {move} -> {'cleared' if effective else 'already empty, nothing changed'} (+0)."
        return Transition(
            reward=0.0,
            action_is_effective=effective,
            info={"move": str(move), "empty_cells": self.empty_cells},
        )

    def _place(self, move: Move, cell: int, where: str) -> Transition:
        digit = int(move.digit or 0)
        if self._grid[cell] == digit:
            self._obs = None
            self._last = f"Last accepted move: {move} -> {where} already holds {digit}, nothing changed (+0)."
            return Transition(
                reward=0.0,
                action_is_effective=False,
                info={"move": str(move), "empty_cells": self.empty_cells},
            )
        clash = self.conflicts(cell, digit)
        if clash:
            g = self._g
            cells = [[g.row[j] + 1, g.col[j] + 1] for j in clash]
            units = [
                u
                for u, same in (
                    ("row", lambda j: g.row[j] == g.row[cell]),
                    ("column", lambda j: g.col[j] == g.col[cell]),
                    ("box", lambda j: g.box_of[j] == g.box_of[cell]),
                )
                if any(same(j) for j in clash)
            ]
            at = ", ".join(f"row {r} col {c}" for r, c in cells)
            return self._invalid(
                f"{digit} is already in the same {' and '.join(units)} ({at})",
                move=str(move),
                conflicts=cells,
            )
        was_empty = not self._grid[cell]
        self._grid[cell] = digit
        reward = 0.0
        if was_empty and cell not in self._earned and self._earns(cell, digit):
            self._earned.add(cell)
            reward = float(self.config["placement_reward"])
        empty = self.empty_cells
        solved = empty == 0 and self._rules_hold()
        if solved:
            reward += float(self.config["completion_reward"])
        note = "solved!" if solved else ("placed" if was_empty else "overwritten")
        self._obs = None
        self._last = f"Last accepted move: {move} -> {note} ({reward:+g})."
        return Transition(
            reward=reward,
            terminated=solved,
            success=solved,
            info={"move": str(move), "empty_cells": empty},
        )

    def _earns(self, cell: int, digit: int) -> bool:
        """Whether placing ``digit`` in ``cell`` can earn ``placement_reward`` under ``placement_rule``.

        ``legal`` (default, RAGEN's rule): any digit that breaks no rule — so a digit that
        differs from the solution also earns (a policy placing only such digits returns
        about 3.8 on 9x9-Hard; docs/envs/sudoku.md).  ``correct``: only the solution's
        digit earns; a wrong one earns 0 and leaves the cell able to earn later.
        """
        return self.config["placement_rule"] == "legal" or self._solution[cell] == digit

    def _rules_hold(self) -> bool:
        """Every row, column and box holds each digit once (checked from scratch)."""
        g, grid = self._g, self._grid
        want = g.full
        for unit in (g.row, g.col, g.box_of):
            masks = [0] * g.n
            for i, v in enumerate(grid):
                masks[unit[i]] |= 1 << v
            if any(m != want for m in masks):
                return False
        return True

    # -------------------------------------------------------- observation
    def _observation(self) -> str:
        if self._obs is None:  # re-rendered only after the state changed
            self._obs = "\n".join(
                [
                    render_grid(self._grid, self._givens),
                    f"Empty cells: {self.empty_cells}.",
                    self._last,
                ]
            )
        return self._obs

    @property
    def instruction(self) -> str:
        n, b = self._g.n, self._g.box
        c = self.config
        return join_lines(
            [
                f"You are solving a {n}x{n} Sudoku. Fill every empty cell with a digit from 1 to {n} so that"
                f" each row, each column and each {b}x{b} box contains every digit exactly once.",
                "The grid shows [d] for a given digit (it cannot be changed), d for a digit you placed,"
                " and . for an empty cell. Rows and columns are numbered from 1 (row 1 col 1 is the top-left cell).",
                "Moves:",
                "  place N at row R col C   (write digit N into the cell at row R, column C)",
                "  R,C,N                    (the same move in short form; (R,C,N) also works)",
                "  clear row R col C        (empty a cell you filled)",
                "You may change a digit you placed by placing another one in its cell.",
                f"A move that breaks a rule (the digit is already in the row, column or box; a given cell;"
                f" a number out of range; an unreadable move) is rejected, costs {-float(c['invalid_action_reward']):g}"
                " point and leaves the grid unchanged.",
                f"Rewards: +{float(c['placement_reward']):g} the first time you fill each empty cell"
                + (" with its correct digit" if c["placement_rule"] == "correct" else "")
                + ", 0 for changing or"
                f" clearing a cell, +{float(c['completion_reward']):g} when the grid is complete.",
                "Answer with one or more moves separated by ||, for example <answer>place 4 at row 1 col 3</answer>"
                " or <answer>1,3,4 || 2,1,3</answer>.",
            ]
        )

    # -------------------------------------------------------------- oracle
    def oracle_actions(self) -> list[str]:
        """The solver's plan from the current state: clear every cell holding a digit
        that differs from the unique solution, then place the solution's digit in every
        empty cell, row-major.  ``[]`` once the episode is over."""
        if self.status.is_terminal:
            return []
        g = self._g
        plan: list[str] = []
        places: list[str] = []
        for i, (cur, want) in enumerate(zip(self._grid, self._solution)):
            if cur == want:
                continue
            r, c = g.row[i] + 1, g.col[i] + 1
            if cur:
                plan.append(str(Move("clear", r, c)))
            places.append(str(Move("place", r, c, want)))
        return plan + places

    def optimal_return(self) -> float:
        """``empty cells of the puzzle * placement_reward + completion_reward``: each empty
        cell earns once, then the completion bonus; computed from the puzzle alone."""
        empty = sum(1 for v in self._givens if not v)
        return empty * float(self.config["placement_reward"]) + float(
            self.config["completion_reward"]
        )

    def sample_action(self, rng: np.random.Generator) -> str:
        """A uniformly random ``place N at row R col C`` with ``N, R, C`` in ``1..n``
        (well-formed; often against the rules)."""
        n = self._g.n
        d, r, c = (int(x) for x in rng.integers(1, n + 1, size=3))
        return str(Move("place", r, c, d))
