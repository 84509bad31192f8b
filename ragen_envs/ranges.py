"""Numeric ranges of settings: one declaration gives the check, its message and its JSON Schema.

A :class:`Range` is an interval with optional closed (``ge``/``le``) or open
(``gt``/``lt``) ends.  Every range also requires a finite number: ``NaN`` slips past
any comparison (``nan < 0`` and ``nan > 1`` are both false), so it is refused first.
``Range.schema()`` gives the same bounds as JSON Schema (Draft 2020-12 ``minimum``,
``exclusiveMinimum``, ``maximum``, ``exclusiveMaximum``), so a config's checked-in schema
and its runtime check cannot disagree.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["FINITE", "Range", "check_finite"]


def check_finite(name: str, value: Any) -> None:
    """Raise unless ``value`` is a finite number (``bool`` is not a number here).

    Raises:
        ValueError: ``"{name} must be a finite number, got nan"``.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{name} must be a number, got {value!r}")
    if not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number, got {value!r}")


@dataclass(frozen=True)
class Range:
    """Allowed values of a numeric setting: finite and within the given ends.

    Attributes:
        ge / gt: lower end, closed (``>=``) or open (``>``); ``None`` for none.
        le / lt: upper end, closed (``<=``) or open (``<``); ``None`` for none.
    """

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None

    def describe(self) -> str:
        """The range in words: ``>= 1``, ``in (0, 1]``, ``a finite number``."""
        low = (
            f"[{_num(self.ge)}"
            if self.ge is not None
            else f"({_num(self.gt)}"
            if self.gt is not None
            else None
        )
        high = (
            f"{_num(self.le)}]"
            if self.le is not None
            else f"{_num(self.lt)})"
            if self.lt is not None
            else None
        )
        if low and high:
            return f"in {low}, {high}"
        if low:
            return f"{'>=' if self.ge is not None else '>'} {low[1:]}"
        if high:
            return f"{'<=' if self.le is not None else '<'} {high[:-1]}"
        return "a finite number"

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` (``"must be >= 0, got -1"``), or ``None`` when it fits."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {value!r}"
        if not math.isfinite(value):
            return f"must be a finite number, got {value!r}"
        if (
            (self.ge is not None and not value >= self.ge)
            or (self.gt is not None and not value > self.gt)
            or (self.le is not None and not value <= self.le)
            or (self.lt is not None and not value < self.lt)
        ):
            return f"must be {self.describe()}, got {value!r}"
        return None

    def check(self, name: str, value: Any) -> None:
        """Raise ``ValueError("{name} must be ..., got ...")`` unless ``value`` fits."""
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(f"{name} {problem}")

    def schema(self) -> dict[str, float]:
        """The bounds as JSON Schema keywords."""
        out: dict[str, float] = {}
        for key, value in (
            ("minimum", self.ge),
            ("exclusiveMinimum", self.gt),
            ("maximum", self.le),
            ("exclusiveMaximum", self.lt),
        ):
            if value is not None:
                out[key] = value
        return out


#: Any finite number.
FINITE = Range()


def _num(value: float | None) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)
