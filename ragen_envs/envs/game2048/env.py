"""The 2048 text environment (spec: ``docs/envs/game2048.md``)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import numpy as np

from ...core import TextEnv, Transition, join_lines
from ...seeding import in_split, sample_instance
from .board import MOVES, SIZE, legal_moves, merge_reward, move, parse_board, render, rows_of, spawn
from .expectimax import best_move

#: Generator attempts per reset (an attempt fails only when its start board lies in
#: another split, 20-90% of the time, so the bound is never reached in practice).
MAX_ATTEMPTS = 1_000


class Game2048Env(TextEnv):
    """2048 on a 4x4 board: slide and merge tiles until one reaches the target tile.

    Config (``ragen_envs/envs/game2048/config.schema.json``): ``split``, ``max_steps``
    (150), ``invalid_action_reward`` (-0.1), ``illegal_move_reward`` (-0.1: a move that
    changes nothing), ``target_tile`` (128), ``two_probability`` (0.9, RAGEN's
    ``two_prob``).

    Actions ``Up``, ``Right``, ``Down``, ``Left`` (case-insensitive).  Reward per step
    (spec page, reward table): a legal move earns RAGEN's
    :func:`.board.merge_reward` ``0.1 * log2(M + 1)`` for merge score ``M > 0``, else 0;
    an illegal move (the board does not change) earns ``illegal_move_reward``, which
    RAGEN's log transform loses (RAGEN-AI/RAGEN ragen/env/), and spawns nothing, so neither the
    board nor ``np_random`` changes; an action that is no move is an invalid action
    (``invalid_action_reward``).  The episode terminates with success when a tile
    reaches ``target_tile`` and with failure when no move is legal.

    Reset options: ``{"board": rows}`` (4 rows of 4 tile values) starts from that board
    instead of two random tiles.

    ``info`` after reset: ``board`` (4 x 4 values), ``score`` (0), ``max_tile``,
    ``target_tile``, ``generation_attempts``.  After a step: ``board``, ``score`` (sum
    of all merge scores so far, the classic 2048 score), ``max_tile``; on a valid action
    also ``action``, ``merge_score`` and ``spawn`` (``{"cell": [row, col], "value":
    v}``, ``null`` after an illegal move).

    Raises (from ``reset``):
        ValueError: a board passed in ``options`` is malformed, already holds the
            target tile, or allows no move.
    """

    env_key = "game2048"
    #: A new tile is a random outcome (TextEnv.stochastic_outcomes; config ``outcomes``).
    stochastic_outcomes = True
    action_names = MOVES
    #: The baseline is expectimax, not an optimal policy (see :meth:`oracle_actions`).
    oracle_is_exact = False

    def __init__(self, render_mode: str | None = None, **config: Any):
        super().__init__(render_mode=render_mode, **config)
        self._p2 = float(self.config["two_probability"])
        self._target = int(self.config["target_tile"])
        self._board: tuple[int, ...] = (0,) * (SIZE * SIZE)
        self._score = 0
        self._attempts = 1
        self._legal: list[str] = []  # legal moves of the current board (for the observation)
        self._plan: tuple[list[tuple[tuple[int, ...], Mapping[str, Any]]], list[str]] | None = None

    # ------------------------------------------------------------ instance
    def _start_board(self, rng: Any) -> tuple[int, ...]:
        board: tuple[int, ...] = (0,) * (SIZE * SIZE)
        for _ in range(2):
            board, _ = spawn(board, rng, self._p2)
        return board

    def _reset(self, options: Mapping[str, Any]) -> None:
        self._score, self._plan = 0, None
        if "board" in options:
            board = parse_board(options["board"])
            if max(board) >= self._target:
                raise ValueError(f"the board already holds the target tile {self._target}")
            if not legal_moves(board):
                raise ValueError(
                    "no move is legal on this board: the game would be over before it starts"
                )
            self._board, self._attempts = board, 1
        else:
            split = self.config["split"]

            def build(rng):
                board = self._start_board(rng)
                return board if in_split(_key(board), split) else None

            self._board, self._attempts = sample_instance(
                self.np_random, build, max_attempts=MAX_ATTEMPTS
            )
        self._legal = legal_moves(self._board)

    def _reset_info(self) -> dict[str, Any]:
        return {
            "board": rows_of(self._board),
            "score": 0,
            "max_tile": max(self._board),
            "target_tile": self._target,
            "generation_attempts": self._attempts,
        }

    @property
    def board(self) -> tuple[int, ...]:
        """The 16 tile values, row-major (0 = empty)."""
        return self._board

    @property
    def score(self) -> int:
        """Sum of the merge scores of this episode's moves (the classic 2048 score)."""
        return self._score

    # ---------------------------------------------------------------- step
    def invalid(self, reason: str, **info: Any) -> Transition:
        """An invalid action's transition, with ``board``, ``score`` and ``max_tile`` in ``info``.

        Every invalid step carries them — also an over-long or non-string action, which
        the base class refuses before :meth:`_step`.
        """
        return super().invalid(reason, **self._board_info(), **info)

    def _tile_rng(self) -> np.random.Generator:
        """:meth:`_outcome_rng`, which is a NumPy ``Generator`` here: this env does not set
        :attr:`lazy_seeding`, so no :class:`~ragen_envs.pcg64.PCG64Stream` is ever live."""
        rng = self._outcome_rng()
        assert isinstance(rng, np.random.Generator)
        return rng

    def _step(self, action: str) -> Transition:
        name = self.match_action(action)
        if name is None:
            return self.invalid(f"unknown action: expected one of {list(MOVES)}")
        after, merged = move(self._board, name)
        if after == self._board:
            return Transition(
                reward=float(self.config["illegal_move_reward"]),
                action_is_effective=False,
                info={"action": name, "merge_score": 0, "spawn": None, **self._board_info()},
            )
        self._board, (cell, value) = spawn(after, self._tile_rng(), self._p2)
        self._score += merged
        self._legal = legal_moves(self._board)
        won = max(self._board) >= self._target
        lost = not won and not self._legal
        return Transition(
            reward=merge_reward(merged),
            terminated=won or lost,
            success=won,
            info={
                "action": name,
                "merge_score": merged,
                "spawn": {"cell": [cell // SIZE, cell % SIZE], "value": value},
                **self._board_info(),
            },
        )

    def _board_info(self) -> dict[str, Any]:
        return {"board": rows_of(self._board), "score": self._score, "max_tile": max(self._board)}

    def _observation(self) -> str:
        legal = self._legal
        return join_lines(
            [
                render(self._board),
                f"Score: {self._score}. Largest tile: {max(self._board)}. Target tile: {self._target}.",
                "Moves that change the board: "
                + (", ".join(legal) if legal else "none (game over)"),
            ]
        )

    @property
    def instruction(self) -> str:
        c = self.config
        return join_lines(
            [
                f"You are playing 2048 on a 4x4 board. Reach a tile of {self._target} to win.",
                "The board shows the tile values row by row; . is an empty cell.",
                "Actions: Up, Right, Down, Left (case-insensitive). A move slides every tile as far as possible in that"
                " direction; two equal tiles that meet merge into one tile of their sum (each tile merges at most once"
                " per move). After every move that changes the board a new tile appears on a random empty cell"
                f" (a 2 with probability {self._p2:g}, else a 4).",
                "A move that merges tiles whose new values sum to M gives reward 0.1 * log2(M + 1); a move without"
                f" merges gives 0; a move that changes nothing gives {c['illegal_move_reward']:g}.",
                f"The game is won when a tile reaches {self._target} and lost when no move changes the board.",
                "Answer with one or more moves separated by ||, for example <answer>Left || Down</answer>.",
            ]
        )

    # ------------------------------------------------------------ baseline
    def oracle_actions(self) -> list[str]:
        """The expectimax baseline's moves (:func:`.expectimax.best_move` at its default
        depth) from now to the end of the episode.

        Each move is chosen from the board alone, exactly as a policy that sees every
        spawn before it moves; the plan is only *computed* ahead by replaying the env's
        own generator on a copy (privileged, like every oracle), so that agent loops
        which take several actions per turn can play it.  The plan stays valid while the
        env follows it; after anything else (an invalid action does not count: it changes
        neither board nor generator) it is recomputed.  ``[]`` once the episode is over.
        """
        if self.status.is_terminal:
            return []
        here = (self._board, self._tile_rng().bit_generator.state)
        budget = self._max_steps - self.num_steps
        if self._plan is not None:
            checkpoints, moves = self._plan
            for k, point in enumerate(checkpoints):
                if point == here:
                    return moves[k : k + budget]
        rng = copy.deepcopy(self._tile_rng())
        board = self._board
        checkpoints, moves = [], []
        while len(moves) < budget:
            name = best_move(board, None, self._p2)
            if name is None:
                break
            checkpoints.append((board, rng.bit_generator.state))
            moves.append(name)
            board, _ = spawn(move(board, name)[0], rng, self._p2)
            if max(board) >= self._target or not legal_moves(board):
                break
        self._plan = (checkpoints, moves)
        return list(moves)


def _key(board: tuple[int, ...]) -> str:
    """The split key of a start board."""
    return ",".join(map(str, board))
