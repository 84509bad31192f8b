"""Strict JSON: what the project writes and reads is RFC 8259 JSON, never ``NaN``/``Infinity``.

Python's :mod:`json` writes ``NaN``, ``Infinity`` and ``-Infinity`` for non-finite floats
and reads them back (and reads ``1e999`` as ``inf``), although RFC 8259 §6 has no such
numbers: other JSON readers (``jq``, JavaScript, most schema validators) reject the file,
and a JSON Schema ``minimum``/``maximum`` cannot see a NaN after parsing (every
comparison with NaN is false).  Every file the project writes goes through :func:`dumps`
(``allow_nan=False``; the error names where the bad number is), and readers that check
files use :func:`loads` (or the file readers :func:`read_json` and :func:`iter_jsonl`, whose
errors name the file and line), which refuse the non-standard constants and overflowing
numbers.

This module is in ``ragen_envs`` (the bottom package) so that ``ragen_bench`` and
``ragen_train`` can import it; it depends on the standard library only.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "JSONFileError",
    "NonFiniteNumberError",
    "dumps",
    "find_nonfinite",
    "iter_jsonl",
    "loads",
    "read_json",
]


class NonFiniteNumberError(ValueError):
    """A ``NaN`` or infinite number where JSON must hold a finite one.

    Attributes:
        where: JSON path of the value (``$.metrics.success.mean``), or the source text's
            token (``NaN``, ``1e999``) when reading.
    """

    def __init__(self, where: str, message: str):
        self.where = where
        super().__init__(message)


def find_nonfinite(obj: Any, path: str = "$") -> str | None:
    """The JSON path of the first non-finite float in ``obj`` (dicts, lists, tuples), else ``None``."""
    if isinstance(obj, float):
        return None if math.isfinite(obj) else path
    if isinstance(obj, dict):
        for k, v in obj.items():
            found = find_nonfinite(v, f"{path}.{k}")
            if found:
                return found
    elif isinstance(obj, (list, tuple)):
        for i, v in enumerate(obj):
            found = find_nonfinite(v, f"{path}[{i}]")
            if found:
                return found
    return None


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps(obj, allow_nan=False, **kwargs)``.

    Raises:
        NonFiniteNumberError: ``obj`` holds a ``NaN`` or infinite float (the message
            names its JSON path); nothing is returned, so nothing invalid gets written.
        TypeError: a value JSON cannot represent (as :func:`json.dumps`).
    """
    try:
        return json.dumps(obj, allow_nan=False, **kwargs)
    except ValueError as exc:
        where = find_nonfinite(obj)
        if (
            where is None
        ):  # pragma: no cover - json raises ValueError only for non-finite floats and cycles
            raise
        raise NonFiniteNumberError(
            where, f"refusing to write a non-finite number at {where} (JSON has no NaN or Infinity)"
        ) from exc


def _parse_constant(token: str) -> Any:
    raise NonFiniteNumberError(token, f"non-finite number {token} (JSON has no NaN or Infinity)")


def _parse_float(token: str) -> float:
    value = float(token)
    if not math.isfinite(value):
        raise NonFiniteNumberError(token, f"number {token} is out of the range of a double")
    return value


def loads(text: str | bytes) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity``, ``-Infinity`` and overflowing numbers.

    Raises:
        NonFiniteNumberError: such a number (a ``ValueError``; no position: the caller
            names the file and line).
        json.JSONDecodeError: text that is not JSON.
    """
    return json.loads(text, parse_constant=_parse_constant, parse_float=_parse_float)


class JSONFileError(ValueError):
    """A JSON or JSONL file that cannot be read as strict JSON (one line: ``path:line: reason``).

    Attributes:
        path: the file.
        line: 1-based line number, when known.
        reason: what is wrong.
    """

    def __init__(self, path: str | os.PathLike[str], reason: str, line: int | None = None):
        self.path, self.line, self.reason = Path(path), line, reason
        super().__init__(f"{path}:{line}: {reason}" if line is not None else f"{path}: {reason}")


def _decode_error(exc: ValueError) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"not UTF-8 text (byte {exc.start} of the line is {exc.object[exc.start : exc.start + 1]!r})"
    if isinstance(exc, json.JSONDecodeError):
        return f"invalid JSON at column {exc.colno}: {exc.msg}"
    return str(exc)


def read_json(path: str | os.PathLike[str]) -> Any:
    """The strict JSON document in file ``path`` (UTF-8).

    Raises:
        JSONFileError: unreadable, not UTF-8, not JSON, or holding ``NaN``/``Infinity``;
            the message names the file and, where known, the line.
    """
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise JSONFileError(path, f"cannot read ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise JSONFileError(
            path,
            _decode_error(exc).replace(" of the line", ""),
            data.count(b"\n", 0, exc.start) + 1,
        ) from None
    try:
        return loads(text)
    except json.JSONDecodeError as exc:
        raise JSONFileError(
            path, f"invalid JSON at column {exc.colno}: {exc.msg}", exc.lineno
        ) from None
    except ValueError as exc:
        raise JSONFileError(path, str(exc)) from None


def iter_jsonl(path: str | os.PathLike[str]) -> Iterator[tuple[int, Any]]:
    """``(line_number, value)`` for each non-blank line of the JSONL file ``path`` (1-based).

    Lines are read as bytes and decoded one at a time, so a damaged line is reported
    with its number (a text-mode reader fails on the whole file without one).

    Raises:
        JSONFileError: the file cannot be opened, or a line is not UTF-8 or not strict
            JSON (``path:line: reason``).
    """
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise JSONFileError(path, f"cannot read ({exc.strerror or exc})") from None
    with fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                yield n, loads(raw.decode("utf-8"))
            except ValueError as exc:
                raise JSONFileError(path, _decode_error(exc), n) from None
