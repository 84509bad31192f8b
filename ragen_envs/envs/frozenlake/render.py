"""Text renderings of a FrozenLake state: ``grid``, ``coord`` and ``grid_coord``.

Symbols follow RAGEN's FrozenLake lookup (RAGEN-AI/RAGEN ragen/env/): ``P`` player, ``_``
frozen tile (the start tile is drawn as frozen), ``O`` hole, ``G`` goal, ``X`` player
in a hole, ``√`` (U+221A) player on the goal.  The ``coord`` layout mirrors RAGEN's
(board size, then start, goal, player, holes); coordinates are ``(row, col)``,
zero-indexed, row 0 at the top.
"""

from __future__ import annotations

from .maps import GOAL, HOLE, FrozenMap

#: Symbol per map letter when the player is elsewhere.
TILE_SYMBOLS: dict[str, str] = {"S": "_", "F": "_", "H": "O", "G": "G"}
#: Player symbols by the tile under the player.
PLAYER = "P"
PLAYER_IN_HOLE = "X"
PLAYER_ON_GOAL = "\u221a"

#: Legend, in the order the instruction lists it.
LEGEND: tuple[tuple[str, str], ...] = (
    (PLAYER, "you (the player)"),
    ("_", "frozen ice (safe)"),
    ("O", "hole"),
    ("G", "goal"),
    (PLAYER_IN_HOLE, "you, fallen into a hole"),
    (PLAYER_ON_GOAL, "you, on the goal"),
)


def player_symbol(fmap: FrozenMap, state: int) -> str:
    """The player's symbol on state ``state``."""
    tile = fmap.tile(state)
    return PLAYER_IN_HOLE if tile == HOLE else PLAYER_ON_GOAL if tile == GOAL else PLAYER


def render_grid(fmap: FrozenMap, state: int) -> str:
    """One symbol per cell, rows joined by ``\\n``."""
    pr, pc = fmap.coords(state)
    lines = []
    for r, row in enumerate(fmap.rows):
        cells = [TILE_SYMBOLS[ch] for ch in row]
        if r == pr:
            cells[pc] = player_symbol(fmap, state)
        lines.append("".join(cells))
    return "\n".join(lines)


def _fmt(fmap: FrozenMap, state: int) -> str:
    r, c = fmap.coords(state)
    return f"({r}, {c})"


def render_coord(fmap: FrozenMap, state: int) -> str:
    """Coordinate lists::

    Board size: 4 rows x 4 cols (zero-indexed).
    Start: (0, 0)
    Goal: (3, 3)
    Player: (0, 0)            # or "Player on goal: ..." / "Player in hole: ..."
    Holes: (1, 1), (1, 3)     # "Holes: none" when there are none
    """
    tile = fmap.tile(state)
    where = "Player in hole" if tile == HOLE else "Player on goal" if tile == GOAL else "Player"
    holes = ", ".join(_fmt(fmap, h) for h in fmap.holes) or "none"
    return "\n".join(
        [
            f"Board size: {fmap.nrow} rows x {fmap.ncol} cols (zero-indexed).",
            f"Start: {_fmt(fmap, fmap.start)}",
            f"Goal: {_fmt(fmap, fmap.goal)}",
            f"{where}: {_fmt(fmap, state)}",
            f"Holes: {holes}",
        ]
    )


def render(fmap: FrozenMap, state: int, observation_format: str) -> str:
    """Render in ``grid``, ``coord`` or ``grid_coord`` (``"Coordinates:"`` block, then
    ``"Grid Map:"`` block, as in RAGEN's grid_coord).

    Raises:
        ValueError: unknown format.
    """
    if observation_format == "grid":
        return render_grid(fmap, state)
    if observation_format == "coord":
        return render_coord(fmap, state)
    if observation_format == "grid_coord":
        return f"Coordinates:\n{render_coord(fmap, state)}\nGrid Map:\n{render_grid(fmap, state)}"
    raise ValueError(f"unknown observation_format {observation_format!r}")
