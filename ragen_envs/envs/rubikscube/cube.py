"""The 2x2x2 cube as 24 stickers: layout, quarter turns, rotations and corner cubies.

Sticker layout (RAGEN's, RAGEN-AI/RAGEN ragen/env/): six faces in the order
``U L F R B D`` with solved colours ``W O G R B Y``, four stickers per face, so sticker
``4 * face + k``.  Within a face, ``k = 2 * row + col`` reads the face as it appears in
the unfolded net (``docs/envs/rubikscube.md``)::

          U
       L  F  R  B
          D

i.e. looking at the face from outside with the net's "up" on top: F, R, B and L with
U above them; U with B above it; D with F above it.

Every permutation here is derived from geometry, not written out by hand: sticker ``i``
sits on the corner cubie at ``position[i]`` (a vector in ``{-1, 1}^3``, x to the right
of F, y up, z towards the viewer of F) and faces along ``normal[i]``.  A clockwise
quarter turn of a face (clockwise as seen looking at that face) rotates the stickers of
its layer by -90 degrees about the face's outward normal.

A state is a ``bytes`` object of 24 colour indices (0..5, :data:`COLOURS` order).  A
move is a permutation ``p`` applied as ``new[j] = old[p[j]]`` (:func:`apply`).
"""

from __future__ import annotations

from collections.abc import Sequence
from operator import itemgetter

import numpy as np

#: Faces in sticker order, with their outward normals and net orientation: for each face
#: the direction of the net's "right" and "up" when looking at it from outside.
FACES: tuple[str, ...] = ("U", "L", "F", "R", "B", "D")
#: Colour letter of each face of the solved cube (RAGEN: White, Orange, Green, Red, Blue, Yellow).
COLOURS: tuple[str, ...] = ("W", "O", "G", "R", "B", "Y")
COLOUR_NAMES: tuple[str, ...] = ("white", "orange", "green", "red", "blue", "yellow")

_NORMAL = {
    "U": (0, 1, 0),
    "L": (-1, 0, 0),
    "F": (0, 0, 1),
    "R": (1, 0, 0),
    "B": (0, 0, -1),
    "D": (0, -1, 0),
}
_RIGHT = {
    "U": (1, 0, 0),
    "L": (0, 0, 1),
    "F": (1, 0, 0),
    "R": (0, 0, -1),
    "B": (-1, 0, 0),
    "D": (1, 0, 0),
}
_UP = {
    "U": (0, 0, -1),
    "L": (0, 1, 0),
    "F": (0, 1, 0),
    "R": (0, 1, 0),
    "B": (0, 1, 0),
    "D": (0, 0, 1),
}

#: The twelve actions in RAGEN's order (its ids 1..12): clockwise turn, then its inverse.
ACTIONS: tuple[str, ...] = ("U", "U'", "D", "D'", "L", "L'", "R", "R'", "F", "F'", "B", "B'")

SOLVED: bytes = bytes(f for f in range(6) for _ in range(4))


def _build_geometry() -> tuple[np.ndarray, np.ndarray]:
    pos, nor = [], []
    for face in FACES:
        n, r, u = (np.array(v) for v in (_NORMAL[face], _RIGHT[face], _UP[face]))
        for row in range(2):
            for col in range(2):
                pos.append(n + r * (2 * col - 1) + u * (1 - 2 * row))
                nor.append(n)
    return np.array(pos), np.array(nor)


#: ``(24, 3)`` integer arrays: corner position and outward normal of each sticker.
POSITION, NORMAL = _build_geometry()
_INDEX = {(tuple(p), tuple(n)): i for i, (p, n) in enumerate(zip(POSITION, NORMAL))}


def _rotation(axis: Sequence[int] | np.ndarray, quarter_turns: int) -> np.ndarray:
    """Integer ``3 x 3`` matrix of a rotation by ``quarter_turns * 90`` degrees about a
    unit coordinate axis (right-hand rule: positive = counterclockwise seen from its tip)."""
    a = np.array(axis)
    k = np.array([[0, -a[2], a[1]], [a[2], 0, -a[0]], [-a[1], a[0], 0]])
    c, s = [(1, 0), (0, 1), (-1, 0), (0, -1)][quarter_turns % 4]
    return np.eye(3, dtype=int) * c + k * s + np.outer(a, a) * (1 - c)


def permutation_of(rot: np.ndarray, layer: np.ndarray | None = None) -> tuple[int, ...]:
    """The sticker permutation ``p`` (``new[j] = old[p[j]]``) that rotates the stickers
    selected by the boolean ``layer`` mask (all when ``None``) by ``rot``."""
    perm = list(range(24))
    for i in range(24):
        if layer is None or layer[i]:
            j = _INDEX[(tuple(rot @ POSITION[i]), tuple(rot @ NORMAL[i]))]
            perm[j] = i
    return tuple(perm)


def _move_permutations() -> dict[str, tuple[int, ...]]:
    moves = {}
    for face in FACES:
        n = np.array(_NORMAL[face])
        layer = POSITION @ n > 0
        moves[face] = permutation_of(_rotation(n, -1), layer)
        moves[face + "'"] = permutation_of(_rotation(n, 1), layer)
    return {name: moves[name] for name in ACTIONS}


#: Sticker permutation of each action.
MOVES: dict[str, tuple[int, ...]] = _move_permutations()
_GETTERS = {name: itemgetter(*perm) for name, perm in MOVES.items()}
#: The inverse of each action (``X`` <-> ``X'``).
INVERSE: dict[str, str] = {a: (a[0] if a.endswith("'") else a + "'") for a in ACTIONS}


def apply(state: bytes, action: str) -> bytes:
    """The state after one action (``KeyError`` for a name not in :data:`ACTIONS`)."""
    return bytes(_GETTERS[action](state))


def apply_permutation(state: bytes, perm: Sequence[int]) -> bytes:
    """``state`` permuted by ``perm`` (``new[j] = state[perm[j]]``)."""
    return bytes(state[i] for i in perm)


def _whole_cube_rotations() -> tuple[tuple[int, ...], ...]:
    """The 24 rotations of the whole cube as sticker permutations (identity first)."""
    gens = [_rotation((1, 0, 0), 1), _rotation((0, 1, 0), 1)]
    found = {tuple(np.eye(3, dtype=int).ravel()): np.eye(3, dtype=int)}
    frontier = list(found.values())
    while frontier:
        nxt = []
        for m in frontier:
            for g in gens:
                r = g @ m
                key = tuple(r.ravel())
                if key not in found:
                    found[key] = r
                    nxt.append(r)
        frontier = nxt
    return tuple(permutation_of(r) for r in found.values())


#: The 24 whole-cube rotations (sticker permutations); ``ROTATIONS[0]`` is the identity.
ROTATIONS: tuple[tuple[int, ...], ...] = _whole_cube_rotations()


def is_solved(state: bytes) -> bool:
    """Every face shows one colour (in any orientation of the whole cube, as RAGEN)."""
    return all(
        state[b] == state[b + 1] == state[b + 2] == state[b + 3] for b in (0, 4, 8, 12, 16, 20)
    )


# ------------------------------------------------------------------ corner cubies
def _corner_slots() -> tuple[tuple[tuple[int, int, int], ...], tuple[tuple[int, int, int], ...]]:
    """Corner positions and, for each, its three sticker indices in a fixed cyclic order.

    The order starts at the sticker on the U or D face and goes on clockwise as seen from
    outside the corner, so the orientation of a cubie is the index (0, 1, 2) of its
    U/D-coloured sticker in that list.
    """
    corners = sorted(
        {(int(p[0]), int(p[1]), int(p[2])) for p in POSITION}, key=lambda c: (-c[1], -c[2], c[0])
    )
    slots: list[tuple[int, int, int]] = []
    for c in corners:
        idx = [i for i in range(24) if tuple(POSITION[i]) == c]
        ud = next(i for i in idx if NORMAL[i][1] != 0)
        a, b = (i for i in idx if i != ud)
        # clockwise seen from outside: det(n_ud, n_a, n_b) < 0
        if np.linalg.det(np.array([NORMAL[ud], NORMAL[a], NORMAL[b]])) > 0:
            a, b = b, a
        slots.append((ud, a, b))
    return tuple(corners), tuple(slots)


#: The eight corner positions, U layer first; :data:`CORNER_STICKERS` gives their stickers.
CORNERS, CORNER_STICKERS = _corner_slots()
#: Colour triple (in slot order) of the cubie that sits in each corner of the solved cube.
CUBIE_COLOURS: tuple[tuple[int, int, int], ...] = tuple(
    (SOLVED[a], SOLVED[b], SOLVED[c]) for a, b, c in CORNER_STICKERS
)
#: The fixed cubie of the solved-state coordinate: the D-B-L corner (yellow, blue, orange).
ANCHOR = CORNERS.index((-1, -1, -1))
_UD = (0, 5)  # colours of the U and D faces (W, Y)


def _cubie_lookup() -> dict[tuple[int, ...], tuple[int, int]]:
    """Every colour triple a corner can show (in slot order) -> ``(cubie, orientation)``."""
    table: dict[tuple[int, ...], tuple[int, int]] = {}
    for cubie, cols in enumerate(CUBIE_COLOURS):
        for k in range(3):  # the U/D colour at slot position k
            table[tuple(cols[(j - k) % 3] for j in range(3))] = (cubie, k)
    return table


_CUBIE_LOOKUP = _cubie_lookup()


def cubie_of(colours: Sequence[int]) -> tuple[int, int] | None:
    """``(cubie, orientation)`` for a corner's three colours read in slot order, or ``None``
    when no cubie of the standard colour scheme shows them in that cyclic order.
    The orientation is the slot position of the cubie's white or yellow sticker."""
    return _CUBIE_LOOKUP.get(tuple(colours))


def cubies(state: bytes) -> tuple[list[int], list[int]] | None:
    """Per corner position the cubie there and its orientation, or ``None`` when some
    corner shows colours no cubie has (a mis-stickered or mirrored corner)."""
    perm, ori = [], []
    lookup = _CUBIE_LOOKUP
    for a, b, c in CORNER_STICKERS:
        found = lookup.get((state[a], state[b], state[c]))
        if found is None:
            return None
        perm.append(found[0])
        ori.append(found[1])
    return perm, ori


def _anchor_rotations() -> dict[tuple[int, int], tuple[int, ...]]:
    """For each place the anchor cubie can be (corner, orientation), the whole-cube
    rotation that brings it home (corner :data:`ANCHOR`, orientation 0)."""
    out = {}
    for rot in ROTATIONS:
        turned = apply_permutation(SOLVED, rot)
        perm, ori = cubies(turned)  # type: ignore[misc]
        where = perm.index(ANCHOR)
        out[(where, ori[where])] = _inverse(rot)
    assert len(out) == 24
    return out


def _inverse(perm: Sequence[int]) -> tuple[int, ...]:
    inv = [0] * len(perm)
    for j, i in enumerate(perm):
        inv[i] = j
    return tuple(inv)


_HOME = _anchor_rotations()
_HOME_GETTERS = {key: itemgetter(*perm) for key, perm in _HOME.items()}


def canonical(state: bytes) -> bytes:
    """``state`` turned as a whole so that the anchor cubie (yellow-blue-orange) is home.

    Two states that differ only by a rotation of the whole cube have the same canonical
    form; a solved cube's canonical form is :data:`SOLVED`.

    Raises:
        ValueError: the state has no valid anchor cubie (see :func:`check_state`).
    """
    for pos, (a, b, c) in enumerate(CORNER_STICKERS):
        found = _CUBIE_LOOKUP.get((state[a], state[b], state[c]))
        if found is not None and found[0] == ANCHOR:
            return bytes(_HOME_GETTERS[(pos, found[1])](state))
    raise ValueError("no yellow-blue-orange corner")


# ---------------------------------------------------------------- user states
def parse_state(text: str) -> bytes:
    """Read 24 sticker letters (``W O G R B Y``, case-insensitive; whitespace, commas and
    brackets ignored) in sticker order ``U L F R B D``, row by row within a face.

    Raises:
        ValueError: a character that is no colour, or not 24 stickers.
    """
    letters = [ch for ch in text.upper() if not ch.isspace() and ch not in ",[]()|:"]
    bad = sorted({ch for ch in letters if ch not in COLOURS})
    if bad:
        raise ValueError(
            f"unknown sticker letter(s) {', '.join(map(repr, bad))}; use {' '.join(COLOURS)}"
        )
    if len(letters) != 24:
        raise ValueError(f"a 2x2 cube has 24 stickers, got {len(letters)}")
    return bytes(COLOURS.index(ch) for ch in letters)


def check_state(state: bytes) -> None:
    """Raise ``ValueError`` unless ``state`` is reachable from the solved cube by turns.

    Checks, in order: 24 stickers; four of each colour; every corner shows the colours of
    a real cubie in the right cyclic order (no opposite colours W/Y, O/R, G/B on one
    corner, no mirror image); each cubie exactly once; the twists of the corners sum to
    0 mod 3.  On the 2x2 these are also sufficient: there are no edges, so every
    permutation of the corners is reachable and there is no permutation-parity
    condition (a quarter turn is a 4-cycle, an odd permutation).
    """
    if len(state) != 24:
        raise ValueError(f"a 2x2 cube has 24 stickers, got {len(state)}")
    counts = [state.count(c) for c in range(6)]
    if counts != [4] * 6:
        wrong = ", ".join(f"{COLOURS[c]}={n}" for c, n in enumerate(counts) if n != 4)
        raise ValueError(f"each colour must appear on exactly 4 stickers ({wrong})")
    perm, ori = [], []
    for slot in CORNER_STICKERS:
        cols = [state[i] for i in slot]
        found = cubie_of(cols)
        if found is None:
            name = "".join(COLOURS[c] for c in cols)
            where = ",".join(FACES[i // 4] + str(i % 4) for i in slot)
            raise ValueError(
                f"the corner at stickers {where} shows {name}, which is no corner of the cube "
                "(opposite colours or a mirrored corner)"
            )
        perm.append(found[0])
        ori.append(found[1])
    if len(set(perm)) != 8:
        raise ValueError("some corner cubie appears twice")
    if sum(ori) % 3:
        raise ValueError(
            f"the corner twists sum to {sum(ori) % 3} mod 3 (a twisted corner): unsolvable"
        )


def render_net(state: bytes) -> str:
    """The unfolded net, one letter per sticker::

        W W
        W W
    O O G G R R B B
    O O G G R R B B
        Y Y
        Y Y
    """

    def row(face: int, r: int) -> str:
        b = 4 * face + 2 * r
        return f"{COLOURS[state[b]]} {COLOURS[state[b + 1]]}"

    pad = " " * 5
    lines = [pad + row(0, r) for r in range(2)]
    lines += ["  ".join(row(f, r) for f in (1, 2, 3, 4)) for r in range(2)]
    lines += [pad + row(5, r) for r in range(2)]
    return "\n".join(lines)
