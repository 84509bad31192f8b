"""Exact optimal solver of the 2x2x2 cube in the quarter-turn metric (the oracle).

The solver holds the distance to solved of every position of the cube: turning the
whole cube does not change how far it is from solved (a solved cube may show any colour
on top, as RAGEN's check), so a position is counted once per rotation class.  Fixing
the yellow-blue-orange cubie in its home corner (:func:`.cube.canonical`) leaves
``7! * 3**6 = 3,674,160`` positions (the other seven cubies' places, and the twists of
six of them; the seventh twist follows because twists sum to 0 mod 3).  The table is
one ``int8`` per position, filled by a breadth-first search from the solved position
over the six turns that keep the anchor corner still (``U R F`` and their inverses;
each of the twelve actions equals one of them up to a whole-cube rotation).  It takes
0.3-1 s with NumPy (move tables computed for all coordinates at once, then one
vectorised pass per level) and is built once per process, on first use.

The diameter of this graph (God's number of the 2x2x2 in the quarter-turn metric) is
14; the level sizes are checked in ``tests/envs/test_rubikscube.py`` against the
published counts (1, 6, 27, 120, 534, 2256, 8969, 33058, 114149, 360508, 930588,
1350852, 782536, 90280, 276 -- Jaap Scherphuis, "Pocket Cube", jaapsch.net/puzzles).

:func:`distance` of a state is a table look-up; :func:`solve` walks down the table,
taking at each step the first action (in :data:`.cube.ACTIONS` order) that lowers the
distance by one, so its plan is optimal and deterministic.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Sequence

import numpy as np

from .cube import ACTIONS, ANCHOR, SOLVED, apply, canonical, cubies

#: Positions of the 2x2x2 up to whole-cube rotations.
N_POSITIONS = math.factorial(7) * 3**6
#: The six turns that leave the anchor corner in place; :func:`distance_table` explores with them.
FIXED_TURNS: tuple[str, ...] = ("U", "U'", "R", "R'", "F", "F'")

_FREE = tuple(p for p in range(8) if p != ANCHOR)  # the seven corners that move
_CUBIE_RANK = {c: k for k, c in enumerate(p for p in range(8) if p != ANCHOR)}


def _perm_rank(items: Sequence[int]) -> int:
    """Lehmer rank of a permutation of ``0..n-1`` (lexicographic order, 0 = identity)."""
    n, rank = len(items), 0
    for i, x in enumerate(items):
        rank = rank * (n - i) + sum(1 for y in items[i + 1 :] if y < x)
    return rank


def index_of(state: bytes) -> int:
    """The table index ``perm_rank * 729 + twist`` of a canonical-form state
    (:func:`.cube.canonical`); the solved cube has index 0."""
    found = cubies(state)
    if found is None:
        raise ValueError("not a valid cube state")
    perm, ori = found
    p = _perm_rank([_CUBIE_RANK[perm[q]] for q in _FREE])
    o = 0
    for q in _FREE[:6]:
        o = o * 3 + ori[q]
    return p * 729 + o


def _turn_effect(name: str) -> tuple[list[int], list[int]]:
    """``(src, twist)`` of a turn that keeps the anchor still: afterwards free corner
    ``i`` (of the seven in ``_FREE``) holds the cubie that was at free corner ``src[i]``,
    its orientation raised by ``twist[i]`` (mod 3).  Read off the solved cube turned once.

    A turn rotates the stickers of a corner as a whole, so the orientation change of a
    cubie depends only on the corners it moves between, not on its orientation before.
    """
    perm, ori = cubies(apply(SOLVED, name))  # type: ignore[misc]
    return [_FREE.index(perm[q]) for q in _FREE], [ori[q] for q in _FREE]


@functools.cache
def _move_tables() -> tuple[np.ndarray, np.ndarray]:
    """``(6, 5040)`` permutation and ``(6, 729)`` twist tables of :data:`FIXED_TURNS`.

    The permutation and the twists move independently under these turns (see
    :func:`_turn_effect`); both tables are computed for all coordinates at once.
    Permutation rank ``r`` is row ``r`` of ``itertools.permutations(range(7))``
    (lexicographic, as :func:`_perm_rank`); twist coordinate ``o`` has the base-3
    digits of row ``o`` of ``itertools.product(range(3), repeat=6)``.
    """
    perms = np.array(list(itertools.permutations(range(7))), dtype=np.int32)  # (5040, 7)
    digits = np.array(list(itertools.product(range(3), repeat=6)), dtype=np.int32)  # (729, 6)
    twists = np.concatenate([digits, (-digits.sum(axis=1) % 3)[:, None]], axis=1)  # (729, 7)
    later = np.triu(np.ones((7, 7), dtype=bool), 1)  # [i, j]: j > i
    fact = np.array([math.factorial(6 - i) for i in range(7)], dtype=np.int32)
    place = 3 ** np.arange(5, -1, -1, dtype=np.int32)
    perm_t = np.empty((6, 5040), dtype=np.int32)
    ori_t = np.empty((6, 729), dtype=np.int32)
    for m, name in enumerate(FIXED_TURNS):
        src, twist = _turn_effect(name)
        moved = perms[:, src]
        smaller_later = ((moved[:, None, :] < moved[:, :, None]) & later).sum(
            axis=2
        )  # Lehmer digits
        perm_t[m] = smaller_later @ fact
        ori_t[m] = ((twists[:, src] + np.array(twist, dtype=np.int32)) % 3)[:, :6] @ place
    return perm_t, ori_t


@functools.cache
def distance_table() -> np.ndarray:
    """``(3674160,)`` ``int8`` array: quarter turns from each position to solved.

    Breadth-first search from index 0 over :data:`FIXED_TURNS`, vectorised per level.
    Built once per process (cached).
    """
    perm_t, ori_t = _move_tables()
    dist = np.full(N_POSITIONS, -1, dtype=np.int8)
    dist[0] = 0
    frontier = np.array([0], dtype=np.int32)
    level = 0
    while frontier.size:
        level += 1
        p, o = np.divmod(frontier, 729)
        for m in range(6):
            nxt = perm_t[m][p] * 729 + ori_t[m][o]
            nxt = nxt[dist[nxt] < 0]
            dist[nxt] = level  # duplicates write the same value
        frontier = np.flatnonzero(dist == level).astype(np.int32)
    return dist


def distance(state: bytes) -> int:
    """Optimal number of quarter turns (:data:`.cube.ACTIONS`) that solve ``state``.

    Raises:
        ValueError: ``state`` is not a valid cube state.
    """
    return int(distance_table()[index_of(canonical(state))])


def solve(state: bytes) -> list[str]:
    """An optimal solution of ``state``: action names, ``len == distance(state)``."""
    table = distance_table()
    plan: list[str] = []
    d = distance(state)
    while d > 0:
        for name in ACTIONS:
            nxt = apply(state, name)
            if table[index_of(canonical(nxt))] == d - 1:
                plan.append(name)
                state, d = nxt, d - 1
                break
        else:  # pragma: no cover - impossible for a consistent table
            raise RuntimeError("no action lowers the distance")
    return plan


def level_sizes() -> list[int]:
    """Number of positions at each distance 0, 1, ..., 14 (see the module docstring)."""
    return np.bincount(distance_table().astype(np.int64)).tolist()
