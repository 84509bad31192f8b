"""Reading and writing Sokoban levels in the standard XSB text format.

XSB is the plain-text format of most published level collections (Sokoban Wiki,
"Level format"): one character per cell,

=======  ====================================
``#``    wall
`` ``    floor (also ``-`` and ``_``)
``$``    box
``.``    goal (target)
``@``    player
``*``    box on a goal
``+``    player on a goal
=======  ====================================

Reading rules (:func:`parse_xsb`):

* A *board line* consists only of the characters above and contains at least one
  ``#``.  A level is a maximal run of consecutive board lines, so levels may be
  separated by blank lines, comment lines or other text.
* Lines starting with ``;`` are comments; ``Title: x`` lines are titles.  The title of a
  level is the comment or title line directly above its board, with no blank line in
  between (``"; 7"`` gives ``"7"``); otherwise the title is empty.  Other text lines
  (``Author: ...``) are ignored.
* Run-length encoded rows (digits, ``|``) are rejected with an error, not misread.
* Validation, with an :class:`XSBError` naming the level and its first line: exactly
  one player; as many boxes as goals, at least one; the player cannot walk off the
  board (the level is closed by walls); every box and goal lies inside the walls.
  Floor cells the player cannot reach even through boxes (the outside, sealed pockets)
  become walls.  Indentation common to all rows is dropped.

Writing (:func:`format_level`) gives canonical XSB: walls that touch no floor cell and
connect to the board's edge are written as spaces (the "outside"), trailing spaces are
dropped, rows and columns wholly outside the walls are left out, and a title becomes a
``; title`` line above the board.  ``parse_xsb`` and ``format_level`` are inverse on
canonical text; writing then reading any level gives the same level up to the removal
of those outside rows and columns.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Iterable, Sequence

from .room import Layout, Puzzle

#: Characters that may appear on a board line.
BOARD_CHARS = frozenset("#@+$*. -_")
_FLOOR = frozenset(" -_")
_RLE_CHARS = BOARD_CHARS | frozenset("0123456789|")


class XSBError(ValueError):
    """An XSB text is malformed or a level in it is not playable.

    Attributes:
        level: 1-based number of the offending level in its file (0: the file).
        line: 1-based line number where that level starts (0 if unknown).
    """

    def __init__(self, message: str, *, source: str = "<xsb>", level: int = 0, line: int = 0):
        self.level = level
        self.line = line
        where = source
        if line:
            where += f":{line}"
        if level:
            where += f" (level {level})"
        super().__init__(f"{where}: {message}")


def _is_board_line(line: str) -> bool:
    return "#" in line and all(ch in BOARD_CHARS for ch in line)


def parse_xsb(text: str, *, source: str = "<xsb>") -> list[Puzzle]:
    """Parse every level of an XSB text.

    Args:
        text: the file contents.
        source: a name for error messages (file path).

    Returns:
        The levels in file order (:class:`~.room.Puzzle`, ``title`` filled in).

    Raises:
        XSBError: no level found, a run-length encoded row, or an invalid level (see
            the module docstring).
    """
    lines = text.splitlines()
    levels: list[Puzzle] = []
    title = ""
    run: list[str] = []
    run_start = 0

    def flush() -> None:
        nonlocal run, title
        if run:
            levels.append(_board_to_puzzle(run, title, source, len(levels) + 1, run_start))
            run, title = [], ""

    for number, raw in enumerate(lines, start=1):
        line = raw.rstrip()
        if _is_board_line(line):
            if not run:
                run_start = number
            run.append(line)
            continue
        flush()
        stripped = line.strip()
        if not stripped:
            title = ""
            continue
        if stripped.startswith(";"):
            title = stripped[1:].strip()
        elif stripped.lower().startswith("title:"):
            title = stripped[6:].strip()
        elif (
            any(ch.isdigit() for ch in stripped)
            and "#" in stripped
            and all(ch in _RLE_CHARS for ch in stripped)
        ):
            raise XSBError(
                "run-length encoded rows are not supported; expand them first",
                source=source,
                level=len(levels) + 1,
                line=number,
            )
    flush()
    if not levels:
        raise XSBError(
            "no level found (a board line holds only '#@+$*. -_' and at least one '#')",
            source=source,
        )
    return levels


def _board_to_puzzle(rows: Sequence[str], title: str, source: str, level: int, line: int) -> Puzzle:
    def fail(msg: str) -> XSBError:
        return XSBError(msg, source=source, level=level, line=line)

    # drop the indentation common to all rows (it is not part of the level)
    left = min(len(row) - len(row.lstrip(" ")) for row in rows)
    right = max(len(row) for row in rows)
    grid = [row[left:right].ljust(right - left) for row in rows]
    h, w = len(grid), right - left
    if h < 3 or w < 3:
        raise fail(f"a level needs at least 3x3 cells, got {h}x{w}")
    players, boxes, goals = [], [], []
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            i = r * w + c
            if ch in "@+":
                players.append(i)
            if ch in "$*":
                boxes.append(i)
            if ch in ".*+":
                goals.append(i)
    if len(players) != 1:
        where = ", ".join(str(divmod(p, w)) for p in players)
        raise fail(
            "no player ('@' or '+')"
            if not players
            else f"{len(players)} players at {where}; expected one"
        )
    if not boxes:
        raise fail("no box ('$' or '*')")
    if len(boxes) != len(goals):
        raise fail(f"{len(boxes)} boxes but {len(goals)} goals; they must be equal")
    # flood fill from the player through every non-wall cell (boxes do not block)
    player = players[0]
    inside = bytearray(h * w)
    inside[player] = 1
    queue = deque([player])
    while queue:
        i = queue.popleft()
        r, c = divmod(i, w)
        if r in (0, h - 1) or c in (0, w - 1):
            raise fail(f"the level is not closed: the player can walk off the board at ({r}, {c})")
        for j in (i - w, i + w, i - 1, i + 1):
            if not inside[j] and grid[j // w][j % w] != "#":
                inside[j] = 1
                queue.append(j)
    for kind, cells in (("box", boxes), ("goal", goals)):
        for i in cells:
            if not inside[i]:
                raise fail(
                    f"{kind} at {divmod(i, w)} is outside the walls (the player cannot reach it)"
                )
    walls = bytes(0 if inside[i] else 1 for i in range(h * w))
    try:
        layout = Layout(h, w, walls, tuple(sorted(goals)))
        return Puzzle(layout, player, tuple(sorted(boxes)), title)
    except ValueError as exc:  # pragma: no cover - the checks above cover these
        raise fail(str(exc)) from None


def load_xsb(path: str | os.PathLike[str]) -> list[Puzzle]:
    """Read the levels of an XSB file (UTF-8).

    Raises:
        OSError: the file cannot be read.
        XSBError: as :func:`parse_xsb`.
    """
    with open(path, encoding="utf-8") as fh:
        return parse_xsb(fh.read(), source=os.fspath(path))


def _exterior(layout: Layout) -> bytearray:
    """Wall cells that touch no floor cell (8-neighbourhood) and connect to the edge."""
    h, w, walls = layout.height, layout.width, layout.walls

    def solid(r: int, c: int) -> bool:
        for dr in (-1, 0, 1):
            for dc in (-1, 0, 1):
                rr, cc = r + dr, c + dc
                if 0 <= rr < h and 0 <= cc < w and not walls[rr * w + cc]:
                    return False
        return True

    out = bytearray(h * w)
    queue: deque[tuple[int, int]] = deque()
    for r in range(h):
        for c in range(w):
            if (r in (0, h - 1) or c in (0, w - 1)) and solid(r, c):
                out[r * w + c] = 1
                queue.append((r, c))
    while queue:
        r, c = queue.popleft()
        for rr, cc in ((r - 1, c), (r + 1, c), (r, c - 1), (r, c + 1)):
            if 0 <= rr < h and 0 <= cc < w and not out[rr * w + cc] and solid(rr, cc):
                out[rr * w + cc] = 1
                queue.append((rr, cc))
    return out


def format_board(
    puzzle: Puzzle, player: int | None = None, boxes: Iterable[int] | None = None
) -> str:
    """The XSB board of ``puzzle`` (or of another state of its layout), rows joined by ``\\n``.

    Rows and columns that lie wholly outside the walls are left out, so the text of a
    generated room may be smaller than its ``dim_room``.
    """
    lay = puzzle.layout
    player = puzzle.player if player is None else player
    box_set = set(puzzle.boxes if boxes is None else boxes)
    outside = _exterior(lay)
    targets = lay.target_set
    rows = []
    for r in range(lay.height):
        chars = []
        for c in range(lay.width):
            i = r * lay.width + c
            if lay.walls[i]:
                chars.append(" " if outside[i] else "#")
            elif i in box_set:
                chars.append("*" if i in targets else "$")
            elif i == player:
                chars.append("+" if i in targets else "@")
            else:
                chars.append("." if i in targets else " ")
        rows.append("".join(chars).rstrip())
    # drop rows and the indentation that lie wholly outside the walls
    while rows and not rows[-1]:
        rows.pop()
    while rows and not rows[0]:
        rows.pop(0)
    indent = min(len(row) - len(row.lstrip(" ")) for row in rows)
    return "\n".join(row[indent:] for row in rows)


def format_level(puzzle: Puzzle) -> str:
    """Canonical XSB text of one level: ``; title`` (if any) and the board."""
    board = format_board(puzzle)
    return f"; {puzzle.title}\n{board}" if puzzle.title else board


def format_levels(puzzles: Iterable[Puzzle], header: Sequence[str] = ()) -> str:
    """An XSB file: ``; header`` comment lines, then the levels separated by blank lines."""
    parts = []
    if header:
        parts.append("\n".join(f"; {h}".rstrip() for h in header))
    parts.extend(format_level(p) for p in puzzles)
    return "\n\n".join(parts) + "\n"
