"""Sokoban board model: the static layout, a puzzle (layout + start state) and the physics.

Cells are addressed by a *flat index* ``i = row * width + col`` (row 0 at the top,
column 0 at the left).  Every layout is closed: all border cells are walls, so the four
neighbours of any floor cell are inside the board and a flat index never wraps.

Physics and rewards are those of gym-sokoban (M. Schrader, 2018), which RAGEN uses
(mpSchrader/gym-sokoban; RAGEN-AI/RAGEN ``ragen/env/sokoban/``):

* actions Up / Down / Left / Right are "push" actions: if the neighbouring cell holds a
  box and the cell beyond it is free (floor or target, no box), the box moves one cell
  and the player follows; otherwise the player moves if the neighbouring cell is free;
  otherwise nothing happens (a no-op, which still costs the step reward);
* reward per step: ``-0.1``; ``+1`` when a box lands on a target; ``-1`` when a box
  leaves a target; ``+10`` (and termination) when every box is on a target.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property
from typing import NamedTuple

#: Action names in the order of :data:`DIRECTIONS`.
ACTION_NAMES: tuple[str, ...] = ("Up", "Down", "Left", "Right")

#: ``(d_row, d_col)`` of each action in :data:`ACTION_NAMES`.
DIRECTIONS: tuple[tuple[int, int], ...] = ((-1, 0), (1, 0), (0, -1), (0, 1))

#: Reward of every step, effective or not (gym-sokoban ``penalty_for_step``).
STEP_REWARD = -0.1
#: Reward when a box is pushed onto a target (gym-sokoban ``reward_box_on_target``).
BOX_ON_TARGET_REWARD = 1.0
#: Reward when a box is pushed off a target (the negative of the above, gym-sokoban).
BOX_OFF_TARGET_REWARD = -1.0
#: Reward when the last box reaches a target (gym-sokoban ``reward_finished``).
FINISHED_REWARD = 10.0


@dataclass(frozen=True)
class Layout:
    """The static part of a room: board size, walls and targets.

    Attributes:
        height: rows (>= 3).
        width: columns (>= 3).
        walls: ``height * width`` bytes, 1 for a wall and 0 for floor, row-major.
        targets: flat indices of the target cells, sorted, at least one.

    Raises:
        ValueError: sizes disagree, a border cell is not a wall, a target is a wall or
            repeated.
    """

    height: int
    width: int
    walls: bytes
    targets: tuple[int, ...]

    def __post_init__(self) -> None:
        h, w = self.height, self.width
        if h < 3 or w < 3:
            raise ValueError(f"a room needs at least 3x3 cells, got {h}x{w}")
        if len(self.walls) != h * w:
            raise ValueError(f"walls has {len(self.walls)} cells, expected {h * w}")
        for r in range(h):
            for c in range(w):
                if (r in (0, h - 1) or c in (0, w - 1)) and not self.walls[r * w + c]:
                    raise ValueError(f"border cell ({r}, {c}) must be a wall")
        if not self.targets:
            raise ValueError("a room needs at least one target")
        if tuple(sorted(set(self.targets))) != tuple(self.targets):
            raise ValueError("targets must be sorted and distinct")
        for t in self.targets:
            if not 0 <= t < h * w or self.walls[t]:
                raise ValueError(f"target {self.rc(t)} is not a floor cell")

    # ---------------------------------------------------------------- geometry
    def index(self, row: int, col: int) -> int:
        """Flat index of ``(row, col)``."""
        return row * self.width + col

    def rc(self, index: int) -> tuple[int, int]:
        """``(row, col)`` of a flat index."""
        return divmod(index, self.width)

    @cached_property
    def deltas(self) -> tuple[int, ...]:
        """Flat-index offset of each action in :data:`ACTION_NAMES`."""
        return tuple(dr * self.width + dc for dr, dc in DIRECTIONS)

    @cached_property
    def floor_cells(self) -> tuple[int, ...]:
        """Flat indices of all non-wall cells, ascending."""
        return tuple(i for i, x in enumerate(self.walls) if not x)

    @cached_property
    def target_set(self) -> frozenset[int]:
        """The targets as a set."""
        return frozenset(self.targets)

    @cached_property
    def target_mask(self) -> int:
        """The targets as a bit mask (bit ``i`` set for target cell ``i``)."""
        return bits(self.targets)

    def key(self) -> bytes:
        """Canonical byte key of the layout (size, walls, targets), used for splits.

        Two rooms have the same key iff they have the same size, walls and targets; the
        split of a generated room is ``ragen_envs.seeding.instance_split(layout.key())``.
        """
        head = f"sokoban-layout-v0|{self.height}x{self.width}|".encode()
        return head + self.walls + b"|" + ",".join(map(str, self.targets)).encode()


@dataclass(frozen=True)
class Puzzle:
    """A playable instance: a layout plus the start state.

    Attributes:
        layout: the static room.
        player: flat index of the player.
        boxes: flat indices of the boxes, sorted; as many as targets.
        title: optional name (XSB title line), ``""`` if none.

    Raises:
        ValueError: the player or a box is on a wall, they overlap, or the number of
            boxes differs from the number of targets.
    """

    layout: Layout
    player: int
    boxes: tuple[int, ...]
    title: str = ""

    def __post_init__(self) -> None:
        lay = self.layout
        if len(self.boxes) != len(lay.targets):
            raise ValueError(f"{len(self.boxes)} boxes but {len(lay.targets)} targets")
        if tuple(sorted(set(self.boxes))) != tuple(self.boxes):
            raise ValueError("boxes must be sorted and distinct")
        for b in self.boxes:
            if not 0 <= b < len(lay.walls) or lay.walls[b]:
                raise ValueError(f"box {lay.rc(b)} is not on a floor cell")
        if not 0 <= self.player < len(lay.walls) or lay.walls[self.player]:
            raise ValueError(f"player {lay.rc(self.player)} is not on a floor cell")
        if self.player in self.boxes:
            raise ValueError(f"player and a box share cell {lay.rc(self.player)}")

    @property
    def num_boxes(self) -> int:
        """Number of boxes (= number of targets)."""
        return len(self.boxes)

    @property
    def is_solved(self) -> bool:
        """Every box is on a target."""
        return set(self.boxes) == self.layout.target_set


class Move(NamedTuple):
    """Outcome of one action under the push physics (:func:`apply_action`).

    Attributes:
        player: the player's cell after the action.
        moved: the player moved (the action was effective).
        box_from: the cell the pushed box left, or ``-1`` when no box moved.
        box_to: the cell the pushed box entered, or ``-1``.
    """

    player: int
    moved: bool
    box_from: int
    box_to: int


def apply_action(layout: Layout, player: int, boxes: set[int], action: int) -> Move:
    """Apply action ``action`` (index into :data:`ACTION_NAMES`) in place on ``boxes``.

    gym-sokoban "push" semantics: push the box ahead if the cell beyond it is free,
    else step if the cell ahead is free, else do nothing.

    Args:
        layout: the room.
        player: the player's flat index.
        boxes: the boxes' flat indices; updated in place when a box is pushed.
        action: 0 Up, 1 Down, 2 Left, 3 Right.

    Returns:
        A :class:`Move`.
    """
    d = layout.deltas[action]
    ahead = player + d
    walls = layout.walls
    if walls[ahead]:
        return Move(player, False, -1, -1)
    if ahead in boxes:
        beyond = ahead + d
        if walls[beyond] or beyond in boxes:
            return Move(player, False, -1, -1)
        boxes.remove(ahead)
        boxes.add(beyond)
        return Move(ahead, True, ahead, beyond)
    return Move(ahead, True, -1, -1)


def step_reward(layout: Layout, move: Move, solved: bool) -> float:
    """Reward of one step (gym-sokoban / RAGEN reward table, RAGEN-AI/RAGEN ``ragen/env/sokoban/``).

    ``STEP_REWARD`` always; ``+1`` if the pushed box entered a target, ``-1`` if it left
    one (both when it moves from a target to a target, which cancel); ``+10`` if every
    box is now on a target.
    """
    reward = STEP_REWARD
    if move.box_from >= 0:
        targets = layout.target_set
        if move.box_to in targets:
            reward += BOX_ON_TARGET_REWARD
        if move.box_from in targets:
            reward += BOX_OFF_TARGET_REWARD
    if solved:
        reward += FINISHED_REWARD
    return reward


def bits(cells: Iterable[int]) -> int:
    """Bit mask with bit ``i`` set for every cell ``i`` in ``cells``."""
    mask = 0
    for c in cells:
        mask |= 1 << c
    return mask


def cells_of(mask: int) -> tuple[int, ...]:
    """Sorted flat indices of the set bits of ``mask``."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return tuple(out)
