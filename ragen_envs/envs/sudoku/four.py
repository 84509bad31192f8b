"""Exact 4x4 puzzle generation on per-process tables (the fast path of a 4x4 reset).

A 4x4 attempt of :func:`.generator.generate_attempt` takes two things from its
generator: the digit order at every branching cell of the fill search (one
``rng.permutation`` each, walked down :func:`.solver._fill_tree`) and the order in which
the cells are offered for emptying (``rng.permutation(16)``).  Everything else is a
function of the complete grid the walk reaches: its split, and which cells can be emptied
without a second solution.  :func:`attempt` runs the draws on the pure-Python
:class:`ragen_envs.pcg64.PCG64Stream` of the attempt (``PCG64Stream.permutation`` is
NumPy's shuffle, draw for draw) and answers the rest from tables built once per process:
the same puzzle, attempt for attempt, as the general path (tested on thousands of seeds).

**Uniqueness by unavoidable sets.**  For the solution ``s`` and another complete grid
``t``, let ``D(s, t)`` be the cells where they differ.  The puzzle that keeps ``s``'s
digits on the cells ``K`` has ``t`` as a second solution iff ``D(s, t)`` misses ``K``, so
it is uniquely solvable iff every ``D(s, t)`` meets ``K``, and it is enough to check the
inclusion-minimal ones, the *unavoidable sets* of ``s`` (McGuire, Tugemann & Civario,
"There is no 16-clue Sudoku", Experimental Mathematics 23(2), 2014).  Emptying cell
``c`` of a uniquely solvable ``K`` keeps it unique iff no unavoidable set ``d`` has
``d & K == {c}``, i.e. ``(d - {c}) & K != 0`` for the sets through ``c``: 6 or 14 integer
ANDs.  Relabelling the digits maps complete grids to complete grids and keeps every
``D``, so the sets are computed for the 12 grids whose first row is ``1 2 3 4`` (14 or 26
sets each, of 4 to 12 cells) and shared by the 24 relabellings of each.
"""

from __future__ import annotations

import functools
import itertools
import operator
from collections.abc import Callable
from typing import Any

from ...pcg64 import PCG64Stream
from ...seeding import in_split
from .grid import solution_key
from .solver import _fill_tree

#: A node of the walk tree: a tuple of child nodes for a branching cell (in the order of
#: its digits), the index of a complete grid in :func:`grids`, or ``None`` (dead end).
Node = Any

_ALL = (1 << 16) - 1


@functools.cache
def _tree() -> tuple[Node, tuple[tuple[int, ...], ...]]:
    """:func:`.solver._fill_tree` for ``n = 4`` with its leaves numbered (in the order of
    the search) and its single-child nodes (forced cells, no draw) left out, and the
    288 complete grids in that order."""
    grids: list[tuple[int, ...]] = []

    def convert(node: Any) -> Node:
        if node is None:
            return None
        digits, children, grid = node
        if grid is not None:
            grids.append(grid)
            return len(grids) - 1
        if len(children) == 1:  # a forced cell draws nothing: its child stands in
            return convert(children[0])
        return tuple(convert(child) for child in children)

    root = convert(_fill_tree(4))
    return root, tuple(grids)


def grids() -> tuple[tuple[int, ...], ...]:
    """The 288 complete 4x4 grids, flat row-major, in the order of the fill search."""
    return _tree()[1]


#: Fields of a packed :func:`_blocks` entry: one per unavoidable set through a cell (at
#: most 14 on a 4x4 grid), 17 bits each (a 16-bit cell set and a guard bit).
_FIELDS = 14
_ONES = sum(1 << (17 * j) for j in range(_FIELDS))  # 1 in every field
_GUARD = _ONES << 16  # every field's guard bit


@functools.cache
def _blocks() -> tuple[tuple[int, ...], ...]:
    """``blocks[s][c]``: the unavoidable sets of grid ``s`` through cell ``c``, each
    without ``c`` (cell ``i`` is bit ``i``), packed into the 17-bit fields of one int
    (unused fields hold all 16 cells, which always meet the kept cells).  With the kept
    cells ``K`` copied into every field (``K * _ONES``), every set meets ``K`` iff
    ``((blocks[s][c] & K * _ONES) | _GUARD) - _ONES`` keeps every guard bit: one test
    for all the sets (a field borrows from its guard bit only when it is zero).  Built
    once (~30 ms, see the module docstring)."""
    all_grids = grids()
    per_pattern: dict[tuple[int, ...], tuple[int, ...]] = {}
    out = []
    for s in all_grids:
        label = {d: k for k, d in enumerate(s[:4], start=1)}
        pattern = tuple(label[v] for v in s)
        if pattern not in per_pattern:
            diffs = {
                sum(1 << i for i in range(16) if pattern[i] != t[i])
                for t in all_grids
                if t != pattern
            }
            minimal: list[int] = []
            for d in sorted(diffs, key=int.bit_count):
                if all(m & d != m for m in minimal):
                    minimal.append(d)
            packed = []
            for c in range(16):
                rests = [d & ~(1 << c) for d in minimal if d >> c & 1]
                rests += [_ALL] * (_FIELDS - len(rests))  # raises below if over _FIELDS
                if len(rests) != _FIELDS:
                    raise AssertionError(f"{len(rests)} unavoidable sets through a cell")
                packed.append(sum(r << (17 * j) for j, r in enumerate(rests)))
            per_pattern[pattern] = tuple(packed)
        out.append(per_pattern[pattern])
    return tuple(out)


#: ``_KEPT[byte]``: the bits of ``byte`` as eight 0/1 ints, lowest first (a kept-cell
#: mask to the factors that blank the emptied cells of the solution).
_KEPT = tuple(tuple(b >> i & 1 for i in range(8)) for b in range(256))


@functools.cache
def _in_split(split: str | None) -> tuple[bool, ...]:
    """Per grid of :func:`grids`: whether it (and so every puzzle made from it) belongs
    to ``split`` (:func:`ragen_envs.seeding.in_split` of its key)."""
    return tuple(in_split(solution_key(g), split) for g in grids())


def shuffle(draw: Callable[[], int], n: int) -> list[int]:
    """``Generator.permutation(n).tolist()`` (``0 <= n <= 16``) from the generator's
    32-bit draws ``draw()`` (:meth:`ragen_envs.pcg64.PCG64Stream.words32`): ``arange(n)``
    shuffled by Fisher-Yates from the last position down, position ``i`` swapped with
    ``random_interval(i)``, i.e. ``draw() & mask`` redrawn while above ``i``, ``mask`` the
    bits of ``i`` (``_shuffle_raw`` in numpy/random/_generator.pyx, ``random_interval`` in
    numpy/random/src/distributions/distributions.c)."""
    out = list(range(n))
    for i, mask in _STEPS[n]:
        v = draw() & mask
        while v > i:
            v = draw() & mask
        out[i], out[v] = out[v], out[i]
    return out


#: ``(i, mask)`` of each Fisher-Yates position of :func:`shuffle`, per length ``n``.
_STEPS = tuple(
    tuple((i, (1 << i.bit_length()) - 1) for i in range(n - 1, 0, -1)) for n in range(17)
)


def _orders(m: int) -> tuple[tuple[int, ...], ...]:
    """Every result of :func:`shuffle` for length ``m``, indexed by its draws
    ``(v[m-1], ..., v[1])`` (``0 <= v[i] <= i``) read as one mixed-radix number."""
    out = []
    for draws in itertools.product(*(range(i + 1) for i in range(m - 1, 0, -1))):
        out.append(tuple(shuffle(iter(draws).__next__, m)))
    return tuple(out)


_P2, _P3, _P4 = _orders(2), _orders(3), _orders(4)


def _walk(node: Node, draw: Callable[[], int]) -> int:
    """The grid index the randomised search reaches from the branching ``node``, ``-1`` if
    none: the node tries its children in the order of one ``rng.permutation(len)`` (as
    :func:`.solver._walk_fill_tree` does), here read from :data:`_P2` / :data:`_P3` /
    :data:`_P4` by the shuffle's draws (``random_interval(1)`` and ``(3)`` take one draw,
    ``(2)`` redraws a 3)."""
    m = len(node)
    if m == 2:
        order = _P2[draw() & 1]
    elif m == 3:
        v = draw() & 3
        while v == 3:
            v = draw() & 3
        order = _P3[v << 1 | draw() & 1]
    else:
        high = draw() & 3
        v = draw() & 3
        while v == 3:
            v = draw() & 3
        order = _P4[(high * 3 + v) << 1 | draw() & 1]
    for j in order:
        child = node[j]
        if child is None:
            continue
        if type(child) is int:
            return child
        found = _walk(child, draw)
        if found >= 0:
            return found
    return -1


def attempt(
    stream: PCG64Stream, num_empty: int, split: str | None
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """One 4x4 generation attempt on ``stream`` (the attempt's generator as a
    :class:`~ragen_envs.pcg64.PCG64Stream`, used once): ``(givens, solution)``, or
    ``None`` where :func:`.generator.generate_attempt` returns ``None`` (grid of another
    split, or the cells ran out before ``num_empty`` could be emptied).

    The walk never meets the fill budget (the tree has 2,369 nodes, the budget 20,000)
    and a uniqueness answer is exact, so no budget applies here.
    """
    root, all_grids = _tree()
    draw = stream.words32().__next__
    s = _walk(root, draw)
    if s < 0 or not _in_split(split)[s]:
        return None
    blocks = _blocks()[s]
    kept = _ALL * _ONES  # the kept cells, in every field (see _blocks)
    removed = 0
    for c in shuffle(draw, 16):
        if removed == num_empty:
            break
        if (((blocks[c] & kept) | _GUARD) - _ONES) & _GUARD == _GUARD:  # still unique
            kept ^= _ONES << c
            removed += 1
    if removed < num_empty:
        return None
    solution = all_grids[s]
    keep = kept & _ALL
    return tuple(map(operator.mul, solution, _KEPT[keep & 255] + _KEPT[keep >> 8])), solution
