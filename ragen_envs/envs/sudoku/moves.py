"""The Sudoku move grammar (spec: ``docs/envs/sudoku.md``, "Action grammar").

An action is one of (rows and columns numbered from 1, top-left is row 1 col 1)::

    place N at row R col C        write digit N into cell (R, C)
    R,C,N                         the same move, compact
    (R,C,N)                       the same move, compact, in parentheses
    clear row R col C             empty cell (R, C)

Matching rules, exactly:

* letters are matched case-insensitively (ASCII only);
* leading and trailing whitespace is ignored; wherever the forms above show a space,
  one or more ASCII whitespace characters are required; spaces are also allowed (not
  required) around the commas and inside the parentheses of the compact forms;
* ``col`` may be written ``column``, and a comma may follow the row number
  (``place 4 at row 1, col 3``);
* each number is 1 to 3 ASCII digits (``0``-``9``), read in base 10; whether it is in
  range is a rule check, not a grammar check;
* nothing else is accepted: no trailing punctuation, no extra words, one move per
  action (multi-move answers are split on ``||`` by the response parser).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_NUM = r"([0-9]{1,3})"
_CELL = rf"row\s+{_NUM}\s*(?:,\s*|\s+)(?:col|column)\s+{_NUM}"
_FLAGS = re.IGNORECASE | re.ASCII
_PLACE = re.compile(rf"place\s+{_NUM}\s+at\s+{_CELL}", _FLAGS)
_CLEAR = re.compile(rf"clear\s+{_CELL}", _FLAGS)
_COMPACT = re.compile(rf"{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}", _FLAGS)
_COMPACT_PAREN = re.compile(rf"\(\s*{_NUM}\s*,\s*{_NUM}\s*,\s*{_NUM}\s*\)", _FLAGS)
_ASCII_WS = " \t\n\r\x0b\x0c"


@dataclass(frozen=True)
class Move:
    """A parsed move (1-indexed ``row`` and ``col``; ``digit`` is ``None`` for clear)."""

    kind: str  # "place" or "clear"
    row: int
    col: int
    digit: int | None = None

    def __str__(self) -> str:
        if self.kind == "clear":
            return f"clear row {self.row} col {self.col}"
        return f"place {self.digit} at row {self.row} col {self.col}"


def parse_move(text: str) -> Move | None:
    """Parse one action under the grammar above; ``None`` when it does not match.

    Never raises for a ``str`` argument; runs in time linear in ``len(text)``.
    """
    s = text.strip(_ASCII_WS)
    if len(s) > 64:  # longer than any well-formed move
        return None
    if m := _PLACE.fullmatch(s):
        digit, row, col = (int(x) for x in m.groups())
        return Move("place", row, col, digit)
    if m := (_COMPACT.fullmatch(s) or _COMPACT_PAREN.fullmatch(s)):
        row, col, digit = (int(x) for x in m.groups())
        return Move("place", row, col, digit)
    if m := _CLEAR.fullmatch(s):
        row, col = (int(x) for x in m.groups())
        return Move("clear", row, col)
    return None
