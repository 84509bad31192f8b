"""Procedural Sokoban rooms, solvable by construction, with a known optimal solution length.

One generation attempt (:func:`generate_room`), all randomness from the given generator:

1. **Topology** (in the spirit of gym-sokoban's room generator, M. Schrader 2018, used
   by RAGEN, RAGEN-AI/RAGEN ``ragen/env/sokoban/utils.py``): a walker starts on a random
   interior cell and takes ``int(1.7 * (height + width))`` steps; before each step it
   turns to a uniformly random direction with probability 0.35; it stays inside the
   interior (clamped) and after each step carves one of five small floor stamps
   centred on its cell.  Every stamp contains its centre and consecutive walker cells
   are adjacent, so the floor is connected.  The border is always wall.
2. **Targets**: ``num_boxes`` distinct floor cells, uniformly.  The layout (size,
   walls, targets) is now fixed; if its split (``instance_split(layout.key())``) is not
   the requested one, the attempt fails here, before any search.
3. **Reverse play** (:mod:`.reverse`): breadth-first search backwards from all solved
   states, up to ``max_distance`` steps and ``max_states`` states.  Every discovered
   state has its exact optimal solution length.  The start state is drawn uniformly
   from the deepest states found that have *no* box on a target (so at least one push
   per box is needed, as RAGEN requires by scoring such states 0).  If there is none,
   the attempt fails.

Failed attempts are retried by :func:`ragen_envs.seeding.sample_instance` with stably
derived seeds; after the attempt budget the env uses :func:`fallback_room`.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ...seeding import in_split
from .reverse import reverse_search, unpack
from .room import DIRECTIONS, Layout, Puzzle

#: Walk length per unit of ``height + width`` (gym-sokoban uses 1.7).
WALK_STEPS_FACTOR = 1.7
#: Probability that the walker turns before a step (gym-sokoban uses 0.35).
WALK_TURN_PROB = 0.35
#: Floor stamps carved around the walker, as (d_row, d_col) offsets.  Ours; like
#: gym-sokoban's five 3x3 masks they are small lines, an L and a square.
FLOOR_STAMPS: tuple[tuple[tuple[int, int], ...], ...] = (
    ((0, 0),),
    ((0, -1), (0, 0), (0, 1)),
    ((-1, 0), (0, 0), (1, 0)),
    ((0, 0), (0, 1), (1, 0), (1, 1)),
    ((0, 0), (0, 1), (1, 0)),
)


@dataclass(frozen=True)
class GeneratedRoom:
    """A generated instance.

    Attributes:
        puzzle: the room and its start state.
        optimal_distance: exact length (steps) of a shortest solution.
        fallback: the room is the deterministic fallback, not a random room.
    """

    puzzle: Puzzle
    optimal_distance: int
    fallback: bool = False


def random_walls(rng: np.random.Generator, height: int, width: int) -> bytes:
    """Carve a connected floor by a random walk (step 1 above).

    Returns:
        ``height * width`` bytes, 1 for wall, row-major.
    """
    steps = int(WALK_STEPS_FACTOR * (height + width))
    walls = bytearray(b"\x01" * (height * width))
    r = int(rng.integers(1, height - 1))
    c = int(rng.integers(1, width - 1))
    direction = int(rng.integers(4))
    turns = rng.random(steps).tolist()
    new_dirs = rng.integers(4, size=steps).tolist()
    stamps = rng.integers(len(FLOOR_STAMPS), size=steps).tolist()
    for k in range(steps):
        if turns[k] < WALK_TURN_PROB:
            direction = new_dirs[k]
        dr, dc = DIRECTIONS[direction]
        r = min(max(r + dr, 1), height - 2)
        c = min(max(c + dc, 1), width - 2)
        for orow, ocol in FLOOR_STAMPS[stamps[k]]:
            rr, cc = r + orow, c + ocol
            if 1 <= rr <= height - 2 and 1 <= cc <= width - 2:
                walls[rr * width + cc] = 0
    return bytes(walls)


def generate_room(
    rng: np.random.Generator,
    *,
    height: int,
    width: int,
    num_boxes: int,
    max_distance: int,
    max_states: int,
    split: str | None,
) -> GeneratedRoom | None:
    """One generation attempt (steps 1-3 of the module docstring).

    Args:
        rng: the attempt's generator (``ragen_envs.seeding.attempt_rng``).
        height, width: board size including the wall border.
        num_boxes: boxes (= targets).
        max_distance: largest optimal solution length, in steps, the start may have
            (the env passes ``min(search_depth, max_steps)`` so the oracle can always
            finish within ``max_steps``).
        max_states: state budget of the reverse search.
        split: required split of the layout, or ``None``.

    Returns:
        The room, or ``None`` when this attempt failed (too little floor, wrong split,
        no start state with every box off its target).
    """
    walls = random_walls(rng, height, width)
    floor = [i for i, x in enumerate(walls) if not x]
    if len(floor) < num_boxes + 2:
        return None
    picks = rng.choice(len(floor), size=num_boxes, replace=False).tolist()
    layout = Layout(height, width, walls, tuple(sorted(floor[i] for i in picks)))
    if not in_split(layout.key(), split):
        return None
    res = reverse_search(layout, max_depth=max_distance, max_states=max_states)
    if not res.candidates:
        return None
    key = res.candidates[int(rng.integers(len(res.candidates)))]
    player, boxes = unpack(layout, key)
    return GeneratedRoom(Puzzle(layout, player, boxes), res.depth)


# ---------------------------------------------------------------- fallback rooms
def fallback_possible(height: int, width: int, num_boxes: int) -> bool:
    """True when :func:`fallback_room` has at least one variant for this size."""
    return (width >= 5 and num_boxes <= height - 2) or (height >= 5 and num_boxes <= width - 2)


def _fallback_variants(height: int, width: int, num_boxes: int) -> Iterator[tuple[Puzzle, int]]:
    """Every trivial room of the family, in a fixed order, with its optimal distance.

    In a frame of ``H x W`` (the board, or its transpose), ``n`` boxes sit in rows
    ``r0 .. r0+n-1`` of column ``cb``, each with its target right beside it in column
    ``cb+1``; the player starts left of the first box.  Column ``cb-1`` holds no box, so
    the player walks along it and pushes each box once: push, step back, step down,
    push, ...  An optimal plan therefore has ``1 + 3(n-1) = 3n - 2`` steps (each push
    after the first needs the player to leave the pushed box's old cell and reach the
    next pushing cell, two steps at least).  Variants: transposed or not, mirrored or
    not, every ``cb`` and ``r0``, and the rest of the interior open or walled.
    """
    n = num_boxes
    for transpose in (False, True):
        frame_h, frame_w = (width, height) if transpose else (height, width)
        if frame_w < 5 or n > frame_h - 2:
            continue
        for mirror in (False, True):
            for cb in range(2, frame_w - 2):
                for r0 in range(1, frame_h - n):
                    for walled in (False, True):

                        def to_flat(r: int, c: int) -> int:
                            if mirror:
                                c = frame_w - 1 - c
                            return c * width + r if transpose else r * width + c

                        walls = bytearray(b"\x01" * (height * width))
                        for r in range(1, frame_h - 1):
                            for c in range(1, frame_w - 1):
                                if not walled or cb - 1 <= c <= cb + 1:
                                    walls[to_flat(r, c)] = 0
                        targets = tuple(sorted(to_flat(r0 + i, cb + 1) for i in range(n)))
                        boxes = tuple(sorted(to_flat(r0 + i, cb) for i in range(n)))
                        layout = Layout(height, width, bytes(walls), targets)
                        yield Puzzle(layout, to_flat(r0, cb - 1), boxes, "fallback"), 3 * n - 2


def fallback_room(height: int, width: int, num_boxes: int, split: str | None) -> GeneratedRoom:
    """The deterministic fallback room used when every generation attempt failed.

    The first variant (see :func:`_fallback_variants`) whose layout belongs to ``split``;
    if no variant does (possible only for tiny boards), the first variant.

    Raises:
        ValueError: no variant exists (``fallback_possible`` is false).
    """
    first = None
    for puzzle, dist in _fallback_variants(height, width, num_boxes):
        if first is None:
            first = GeneratedRoom(puzzle, dist, True)
        if in_split(puzzle.layout.key(), split):
            return GeneratedRoom(puzzle, dist, True)
    if first is None:
        raise ValueError(f"no fallback room for {height}x{width} with {num_boxes} boxes")
    return first
