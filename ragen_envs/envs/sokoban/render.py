"""Text renderings of a Sokoban state and the symbol vocabularies.

Three observation formats (config ``observation_format``):

* ``grid``: one symbol per cell, rows top to bottom joined by ``\\n`` (RAGEN's grid
  render, RAGEN-AI/RAGEN ``ragen/env/sokoban/env.py``).
* ``coord``: a board-size line, then coordinate lists of walls, targets, boxes, boxes on
  a target and the player.  Unlike RAGEN, which leaves walls out of this render (and
  whose own test expecting them fails, RAGEN-AI/RAGEN ``tests/env/test_sokoban_render.py``), the
  walls are listed: without them the board cannot be reconstructed.
* ``grid_coord``: ``Coordinates:`` + the coord render, then ``Grid map:`` + the grid.

Coordinates are ``(row, column)``, zero-indexed from the top-left cell; Up decreases
the row, Left decreases the column.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from .room import Layout

#: Cell kinds, in RAGEN's ``grid_lookup`` order 0..6 (RAGEN-AI/RAGEN ``ragen/env/sokoban/``).
VOCAB_KEYS: tuple[str, ...] = (
    "wall",
    "empty",
    "target",
    "box_on_target",
    "box",
    "player",
    "player_on_target",
)

#: RAGEN's default symbols (``grid_lookup``, RAGEN-AI/RAGEN ``ragen/env/sokoban/``).
DEFAULT_GRID_VOCAB: dict[str, str] = {
    "wall": "#",
    "empty": "_",
    "target": "O",
    "box_on_target": "\u221a",
    "box": "X",
    "player": "P",
    "player_on_target": "S",
}

#: The alternative symbols of RAGEN's ``SokobanDifferentGridVocab`` preset
#: (``W . G C B A @`` in ``grid_lookup`` order, RAGEN-AI/RAGEN ``config/envs.yaml``).
ALT_GRID_VOCAB: dict[str, str] = {
    "wall": "W",
    "empty": ".",
    "target": "G",
    "box_on_target": "C",
    "box": "B",
    "player": "A",
    "player_on_target": "@",
}

#: How the legend names each cell kind.
VOCAB_MEANINGS: dict[str, str] = {
    "wall": "wall",
    "empty": "empty floor",
    "target": "target",
    "box_on_target": "box on a target",
    "box": "box",
    "player": "player",
    "player_on_target": "player on a target",
}

OBSERVATION_FORMATS: tuple[str, ...] = ("grid", "coord", "grid_coord")


def resolve_vocab(overrides: Mapping[str, str] | None) -> dict[str, str]:
    """The full symbol table: :data:`DEFAULT_GRID_VOCAB` overlaid with ``overrides``.

    Raises:
        ValueError: an unknown key, a symbol that is not exactly one character (or is a
            line break), or two kinds sharing a symbol.
    """
    vocab = dict(DEFAULT_GRID_VOCAB)
    for k, v in (overrides or {}).items():
        if k not in vocab:
            raise ValueError(f"unknown cell kind {k!r}; known: {', '.join(VOCAB_KEYS)}")
        if not isinstance(v, str) or len(v) != 1 or v in "\r\n":
            raise ValueError(
                f"symbol of {k!r} must be one character other than a line break, got {v!r}"
            )
        vocab[k] = v
    seen: dict[str, str] = {}
    for k in VOCAB_KEYS:
        s = vocab[k]
        if s in seen:
            raise ValueError(
                f"{k!r} and {seen[s]!r} share the symbol {s!r}; symbols must be distinct"
            )
        seen[s] = k
    return vocab


def legend(vocab: Mapping[str, str]) -> str:
    """One line naming every symbol, e.g. ``"# wall, _ empty floor, ..."``."""
    return ", ".join(f"{vocab[k]} {VOCAB_MEANINGS[k]}" for k in VOCAB_KEYS)


def grid_template(layout: Layout, vocab: Mapping[str, str]) -> list[str]:
    """The static part of the grid render, one string per output character.

    Cell ``i`` (flat index) is at position ``i + i // width`` (a ``\n`` ends every row
    but the last) and holds the wall, target or empty-floor symbol.  :func:`render_grid`
    copies it and writes the boxes and the player: computing it once per room (the env
    does, at reset) makes a step's render proportional to the number of boxes plus one
    ``join``, not to a scan of the board.
    """
    targets = layout.target_set
    w = layout.width
    sym_wall, sym_empty, sym_target = vocab["wall"], vocab["empty"], vocab["target"]
    out: list[str] = []
    for i, wall in enumerate(layout.walls):
        if i and i % w == 0:
            out.append("\n")
        out.append(sym_wall if wall else sym_target if i in targets else sym_empty)
    return out


def render_grid(
    layout: Layout,
    player: int,
    boxes: Iterable[int],
    vocab: Mapping[str, str],
    template: list[str] | None = None,
) -> str:
    """The grid render: one symbol per cell, rows joined by ``\n`` (no trailing newline).

    ``template`` is :func:`grid_template` of the same ``layout`` and ``vocab`` when the
    caller has it (built here otherwise).  A box is drawn over the player's cell if both
    claim one (an impossible state).
    """
    cells = (grid_template(layout, vocab) if template is None else template).copy()
    targets = layout.target_set
    w = layout.width
    cells[player + player // w] = (
        vocab["player_on_target"] if player in targets else vocab["player"]
    )
    for b in boxes:
        cells[b + b // w] = vocab["box_on_target"] if b in targets else vocab["box"]
    return "".join(cells)


def _cells(layout: Layout, cells: Iterable[int]) -> str:
    items = [f"({r}, {c})" for r, c in (layout.rc(i) for i in sorted(cells))]
    return ", ".join(items) if items else "none"


def render_coord(layout: Layout, player: int, boxes: Iterable[int]) -> str:
    """The coordinate render (lists sorted row-major; ``none`` for an empty list)::

        Board size: 5 rows x 6 columns; positions are (row, column), zero-indexed from the top-left.
        Walls: (0, 0), (0, 1), ...
        Targets: (2, 3)
        Boxes: (2, 2)
        Boxes on target: none
        Player: (2, 1)

    ``Targets`` lists every target (covered or not), ``Boxes`` every box, and
    ``Boxes on target`` the boxes that sit on a target.
    """
    box_set = set(boxes)
    targets = layout.target_set
    walls = [i for i, x in enumerate(layout.walls) if x]
    pr, pc = layout.rc(player)
    return "\n".join(
        [
            f"Board size: {layout.height} rows x {layout.width} columns; "
            "positions are (row, column), zero-indexed from the top-left.",
            f"Walls: {_cells(layout, walls)}",
            f"Targets: {_cells(layout, targets)}",
            f"Boxes: {_cells(layout, box_set)}",
            f"Boxes on target: {_cells(layout, box_set & targets)}",
            f"Player: ({pr}, {pc})",
        ]
    )


def render(
    fmt: str,
    layout: Layout,
    player: int,
    boxes: Iterable[int],
    vocab: Mapping[str, str],
    template: list[str] | None = None,
) -> str:
    """Render in observation format ``fmt`` (``grid``, ``coord`` or ``grid_coord``).

    ``template``: :func:`grid_template` of ``layout`` and ``vocab``, if the caller keeps it.

    Raises:
        ValueError: unknown format.
    """
    if fmt == "grid":
        return render_grid(layout, player, boxes, vocab, template)
    boxes = tuple(boxes)
    if fmt == "coord":
        return render_coord(layout, player, boxes)
    if fmt == "grid_coord":
        return (
            "Coordinates:\n"
            + render_coord(layout, player, boxes)
            + "\nGrid map:\n"
            + render_grid(layout, player, boxes, vocab, template)
        )
    raise ValueError(f"unknown observation format {fmt!r}; expected one of {OBSERVATION_FORMATS}")
