"""Reverse play: breadth-first search backwards from the solved configurations.

A Sokoban state is ``(player cell, set of box cells)``.  Every forward action that
changes the state costs one step and is either a *move* (the player steps into a free
cell) or a *push* (the player steps into a box's cell and the box moves one cell on).
Reversing them gives the two predecessor rules used here, for a state with the player
at ``p`` and each direction ``d``:

* reverse move: if ``p - d`` is free, ``(p - d, boxes)`` reaches the state by moving ``d``;
* reverse push (a *pull*): if additionally a box sits at ``p + d``, then
  ``(p - d, boxes - {p + d} + {p})`` reaches the state by pushing that box ``d``.

A breadth-first search over these predecessors, started from *every* solved state
(boxes exactly on the targets, the player on any other floor cell), visits states in
order of their exact optimal solution length in steps: the first time a state is
discovered at depth ``k``, its shortest forward plan to a solved state has ``k``
actions.  This holds even when the search stops early on its state budget, because
breadth-first discovery order never revises a distance.

RAGEN (via gym-sokoban) instead runs a depth-first search with a depth cut-off over
pulls and scores states by a heuristic (box swaps x box displacement), so it never knows
how long the optimal solution of the room it returns is (RAGEN-AI/RAGEN
``ragen/env/sokoban/utils.py``).

States are packed into one integer ``key = (box_mask << shift) | player`` for speed.
"""

from __future__ import annotations

from dataclasses import dataclass

from .room import Layout, bits, cells_of


def key_shift(layout: Layout) -> int:
    """Bits reserved for the player index in a packed state key."""
    return max(1, (layout.height * layout.width - 1).bit_length())


def pack(layout: Layout, player: int, boxes: tuple[int, ...] | set[int] | frozenset[int]) -> int:
    """Pack ``(player, boxes)`` into a state key."""
    return (bits(boxes) << key_shift(layout)) | player


def unpack(layout: Layout, key: int) -> tuple[int, tuple[int, ...]]:
    """Inverse of :func:`pack`: ``(player, sorted boxes)``."""
    s = key_shift(layout)
    return key & ((1 << s) - 1), cells_of(key >> s)


@dataclass(frozen=True)
class ReverseResult:
    """What a reverse search found.

    Attributes:
        depth: the largest distance (in steps) among ``candidates``; 0 if none.
        candidates: packed keys of the states at distance ``depth`` that have no box on
            a target, in discovery order (deterministic).
        states: number of states discovered (including the solved ones).
        exhausted: the whole state space reachable backwards from the solved states
            was searched (neither ``max_depth`` nor ``max_states`` cut the search).
        found: distance of ``stop_at`` if it was requested and discovered, else ``None``.
    """

    depth: int
    candidates: tuple[int, ...]
    states: int
    exhausted: bool
    found: int | None = None


def solved_states(layout: Layout) -> list[int]:
    """Packed keys of every solved state: boxes on all targets, player on any other floor cell."""
    s = key_shift(layout)
    tmask = layout.target_mask << s
    tset = layout.target_set
    return [tmask | p for p in layout.floor_cells if p not in tset]


def reverse_search(
    layout: Layout,
    *,
    max_depth: int,
    max_states: int,
    stop_at: int | None = None,
) -> ReverseResult:
    """Breadth-first reverse play from the solved states.

    Args:
        layout: the room.
        max_depth: deepest level expanded (distance in steps, >= 0).
        max_states: stop discovering states once this many have been seen (>= 1).
        stop_at: a packed state; stop as soon as it is discovered and report its
            distance in ``found`` (used to measure one given start state).

    Returns:
        A :class:`ReverseResult`; ``candidates`` are the deepest states found whose boxes
        are all off the targets (the generator's start-state pool).
    """
    s = key_shift(layout)
    pmask = (1 << s) - 1
    tmask = layout.target_mask
    walls = layout.walls
    deltas = layout.deltas
    frontier = solved_states(layout)
    visited = set(frontier)
    if stop_at is not None and stop_at in visited:
        return ReverseResult(0, (), len(visited), False, 0)
    best_depth, best = 0, []
    depth = 0
    full = len(visited) >= max_states
    while frontier and depth < max_depth and not full:
        depth += 1
        nxt: list[int] = []
        add = nxt.append
        for key in frontier:
            p = key & pmask
            m = key >> s
            for d in deltas:
                q = p - d
                if walls[q]:
                    continue
                if (m >> q) & 1:
                    continue
                k2 = (m << s) | q
                if k2 not in visited:
                    visited.add(k2)
                    add(k2)
                b = p + d
                if (m >> b) & 1:
                    k3 = (((m ^ (1 << b)) | (1 << p)) << s) | q
                    if k3 not in visited:
                        visited.add(k3)
                        add(k3)
            if len(visited) >= max_states:
                full = True
                break
        if stop_at is not None and stop_at in visited:
            return ReverseResult(0, (), len(visited), False, depth)
        cands = [k for k in nxt if not ((k >> s) & tmask)]
        if cands:
            best_depth, best = depth, cands
        frontier = nxt
    return ReverseResult(best_depth, tuple(best), len(visited), not full and not frontier, None)


def optimal_distance(
    layout: Layout,
    player: int,
    boxes: tuple[int, ...],
    *,
    max_states: int,
    max_depth: int = 1 << 30,
) -> int | None:
    """Exact optimal solution length (steps) of the state ``(player, boxes)`` by reverse play.

    Returns:
        The distance, or ``None`` if the state was not reached within the budgets
        (unsolvable, or too far/large to tell).
    """
    res = reverse_search(
        layout, max_depth=max_depth, max_states=max_states, stop_at=pack(layout, player, boxes)
    )
    return res.found
