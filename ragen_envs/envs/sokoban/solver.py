"""Optimal Sokoban solver: A* over ``(player, boxes)`` states with unit step costs.

The cost of a plan is its number of actions (every effective action costs one step;
no-ops never appear in an optimal plan).  The heuristic is the sum, over boxes, of the
fewest pushes that bring the box from its cell to the nearest target on the empty room
(other boxes ignored, the player assumed able to reach the pushing side).  It is

* admissible: every push moves one box one cell and is one step, so a plan has at least
  as many steps as the pushes it needs;
* consistent: one step moves at most one box by one cell, which changes its term by at
  most one;

so A* with a closed set returns a shortest plan (Hart, Nilsson and Raphael, 1968).  A
box on a cell from which no target can be reached by pushes (e.g. a non-target corner)
makes the state dead; such successors are pruned, which is exact because no plan exists
from them.

This module is the oracle.  It shares no code with the generator's reverse search
(:mod:`.reverse`), so "oracle plan length == generator distance" is a real cross-check.
"""

from __future__ import annotations

import heapq
from collections import deque
from functools import lru_cache

from .room import Layout

_INF = 1 << 30


class SolverBudgetExceeded(RuntimeError):
    """The solver expanded more states than its node budget allows."""


@lru_cache(maxsize=64)
def push_distances(layout: Layout) -> tuple[int, ...]:
    """Fewest pushes from each cell to the nearest target for a lone box.

    A box can be pushed from ``x`` to ``x + d`` when ``x + d`` is floor and the pushing
    cell ``x - d`` is floor.  Computed by a breadth-first search backwards from the
    targets.

    Returns:
        One entry per flat index; ``2**30`` for walls and dead cells.
    """
    walls = layout.walls
    dist = [_INF] * len(walls)
    queue: deque[int] = deque()
    for t in layout.targets:
        dist[t] = 0
        queue.append(t)
    while queue:
        y = queue.popleft()
        for d in layout.deltas:
            x = y - d  # the box came from x, pushed by a player standing at x - d
            if walls[x] or walls[x - d] or dist[x] != _INF:
                continue
            dist[x] = dist[y] + 1
            queue.append(x)
    return tuple(dist)


def solve(
    layout: Layout, player: int, boxes: tuple[int, ...], *, max_nodes: int = 2_000_000
) -> tuple[int, ...] | None:
    """A shortest action sequence from ``(player, boxes)`` to a solved state.

    Results are memoised per ``(layout, player, boxes, max_nodes)`` (the fixed-level
    presets replay the same levels many times).

    Args:
        layout: the room.
        player: the player's flat index.
        boxes: the boxes' flat indices, sorted.
        max_nodes: largest number of state expansions.

    Returns:
        Action indices (0 Up, 1 Down, 2 Left, 3 Right); ``()`` if already solved;
        ``None`` if no plan exists.

    Raises:
        SolverBudgetExceeded: more than ``max_nodes`` expansions were needed.
    """
    return _solve(layout, player, tuple(sorted(boxes)), max_nodes)


@lru_cache(maxsize=512)
def _solve(
    layout: Layout, player: int, boxes: tuple[int, ...], max_nodes: int
) -> tuple[int, ...] | None:
    walls = layout.walls
    deltas = layout.deltas
    dist = push_distances(layout)
    s = max(1, (layout.height * layout.width - 1).bit_length())
    pmask = (1 << s) - 1
    goal = layout.target_mask
    mask = 0
    h0 = 0
    for b in boxes:
        mask |= 1 << b
        h0 += dist[b]
    if mask == goal:
        return ()
    if h0 >= _INF:
        return None
    start = (mask << s) | player
    g_best = {start: 0}
    parent: dict[int, tuple[int, int]] = {}
    heap = [(h0, h0, 0, start)]
    counter = 1
    expanded = 0
    closed = set()
    while heap:
        f, h, _, key = heapq.heappop(heap)
        if key in closed:
            continue
        closed.add(key)
        m = key >> s
        if m == goal:
            plan = []
            while key != start:
                key, a = parent[key]
                plan.append(a)
            plan.reverse()
            return tuple(plan)
        expanded += 1
        if expanded > max_nodes:
            raise SolverBudgetExceeded(f"no plan found within {max_nodes} expansions")
        p = key & pmask
        g_next = f - h + 1  # cost so far of every successor
        for a, d in enumerate(deltas):
            n = p + d
            if walls[n]:
                continue
            if (m >> n) & 1:
                b2 = n + d
                if walls[b2] or (m >> b2) & 1 or dist[b2] >= _INF:
                    continue
                m2 = (m ^ (1 << n)) | (1 << b2)
                h2 = h - dist[n] + dist[b2]
            else:
                m2 = m
                h2 = h
            k2 = (m2 << s) | n
            if k2 in closed:
                continue
            old = g_best.get(k2)
            if old is not None and old <= g_next:
                continue
            g_best[k2] = g_next
            parent[k2] = (key, a)
            heapq.heappush(heap, (g_next + h2, h2, counter, k2))
            counter += 1
    return None
