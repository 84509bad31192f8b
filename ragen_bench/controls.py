"""Control characters in text that reaches a terminal, a log line or a file name.

Text that comes from outside (an endpoint's error message, a run id, a model name) may hold
terminal escape sequences (``ESC [ 2 J`` clears the screen, ``ESC ] 0 ;`` sets the window
title) or line breaks that split one log line into two.  :func:`is_control` names such
characters: Unicode category ``Cc`` (C0, DEL, C1) and the line and paragraph separators
(``Zl``, ``Zp``: U+2028, U+2029), which :meth:`str.splitlines` also splits on.
:func:`visible` shows each as a Python escape instead (a red-team finding: such characters hid or reordered text).
"""

from __future__ import annotations

import unicodedata

_CATEGORIES = frozenset({"Cc", "Zl", "Zp"})


def is_control(char: str) -> bool:
    """Whether the single character ``char`` is a control character or a line separator."""
    return unicodedata.category(char) in _CATEGORIES


def visible(text: str) -> str:
    """``text`` with every :func:`is_control` character (tabs and newlines included) replaced
    by its escape (``\\x1b``, ``\\u2028``, ``\\n``); every other character is kept as it is."""
    if all(not is_control(c) for c in text):
        return text
    return "".join(c.encode("unicode_escape").decode("ascii") if is_control(c) else c for c in text)


__all__ = ["is_control", "visible"]
