"""Gymnasium spaces for free-form text.

Gymnasium's :class:`gymnasium.spaces.Text` only accepts strings drawn from a fixed
character set (ASCII letters and digits by default).  Observations of text
environments contain newlines, punctuation and non-ASCII symbols (``√``), and
actions are whatever a language model writes, so :class:`UnicodeText` keeps
``Text``'s length bounds but accepts any Python string.  Sampling (used by the
Gymnasium checker and random smoke tests) draws from printable ASCII.
"""

from __future__ import annotations

import string
from typing import Any

from gymnasium import spaces

#: Characters used by :meth:`UnicodeText.sample`.
PRINTABLE = string.ascii_letters + string.digits + string.punctuation + " "

#: Default upper bound on observation and action length, in characters.
MAX_TEXT_LENGTH = 1 << 20  # 1 MiB of characters


class UnicodeText(spaces.Text):
    """A :class:`gymnasium.spaces.Text` that contains any ``str`` within its length bounds.

    Args:
        max_length: largest accepted length in characters (inclusive).
        min_length: smallest accepted length in characters (inclusive); default 0.
        seed: seed for :meth:`sample`.

    ``contains(x)`` is true iff ``x`` is a ``str`` with
    ``min_length <= len(x) <= max_length``; any Unicode character is allowed.
    """

    def __init__(self, max_length: int = MAX_TEXT_LENGTH, *, min_length: int = 0, seed: Any = None):
        super().__init__(max_length, min_length=min_length, charset=PRINTABLE, seed=seed)

    def contains(self, x: Any) -> bool:  # noqa: D102 - documented on the class
        return isinstance(x, str) and self.min_length <= len(x) <= self.max_length

    def sample(self, mask: Any = None, probability: Any = None) -> str:
        """Sample a printable-ASCII string of length at most 64 (or ``max_length``)."""
        if mask is None and probability is None:
            hi = min(self.max_length, 64)
            length = int(self.np_random.integers(self.min_length, max(hi, self.min_length) + 1))
            idx = self.np_random.integers(0, len(PRINTABLE), size=length)
            return "".join(PRINTABLE[i] for i in idx)
        return super().sample(mask=mask, probability=probability)

    def __repr__(self) -> str:
        return f"UnicodeText({self.min_length}, {self.max_length})"

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, UnicodeText)
            and self.min_length == other.min_length
            and self.max_length == other.max_length
        )

    __hash__ = None  # type: ignore[assignment]  # mutable RNG state, like other spaces
