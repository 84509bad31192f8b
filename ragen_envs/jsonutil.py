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

import itertools
import json
import math
import os
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = [
    "MAX_DEPTH",
    "MAX_LINE_BYTES",
    "JSONFileError",
    "NestingTooDeep",
    "NonFiniteNumberError",
    "dumps",
    "find_nonfinite",
    "iter_jsonl",
    "loads",
    "raw_lines",
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


#: Deepest nesting of arrays/objects :func:`loads` accepts (a 100,000-deep
#: line ended in an uncaught ``RecursionError``; no file of the project nests past ~10).
MAX_DEPTH = 100
#: Longest JSONL line :func:`iter_jsonl` reads, bytes (a 300 MB episode line was read
#: whole: 984 MB).  An episode with every turn at ``max_completion_chars`` stays far below.
MAX_LINE_BYTES = 64 << 20

_STRINGS = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = [0] * 256
_STEP[ord("[")] = _STEP[ord("{")] = 1
_STEP[ord("]")] = _STEP[ord("}")] = -1


class NestingTooDeep(ValueError):
    """JSON (or YAML) nested deeper than allowed; the message is one line."""


def check_depth(text: str | bytes, limit: int = MAX_DEPTH) -> None:
    """Refuse JSON ``text`` whose arrays/objects nest deeper than ``limit``, before parsing.

    Strings are removed (a regex pass), then everything but brackets (``bytes.translate``),
    and the running depth is summed over what is left: linear, in C but for the last step
    (~2 ms for 280 KiB holding 12,000 brackets).  Skipped when the text holds at most
    ``limit`` opening brackets at all.  UTF-8 continuation bytes are never ASCII brackets.

    Raises:
        NestingTooDeep: the depth passes ``limit``.
    """
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else bytes(text)
    if data.count(b"[") + data.count(b"{") <= limit:
        return
    brackets = _STRINGS.sub(b"", data).translate(None, _NOT_BRACKETS)
    if max(itertools.accumulate(map(_STEP.__getitem__, brackets)), default=0) > limit:
        raise NestingTooDeep(f"nested deeper than {limit} levels")


def loads(text: str | bytes, *, max_depth: int = MAX_DEPTH) -> Any:
    """``json.loads`` that refuses ``NaN``, ``Infinity``, ``-Infinity``, overflowing numbers
    and nesting deeper than ``max_depth``.

    Raises:
        NonFiniteNumberError: such a number (a ``ValueError``; no position: the caller
            names the file and line).
        NestingTooDeep: arrays/objects nested deeper than ``max_depth`` (a ``ValueError``).
        json.JSONDecodeError: text that is not JSON.
    """
    check_depth(text, max_depth)
    if isinstance(text, (bytes, bytearray)):
        text = text.decode("utf-8")
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


def iter_jsonl(
    path: str | os.PathLike[str], max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, Any]]:
    """``(line_number, value)`` for each non-blank line of the JSONL file ``path`` (1-based).

    Lines are read as bytes and decoded one at a time, so a damaged line is reported
    with its number (a text-mode reader fails on the whole file without one).  No line
    is read past ``max_line_bytes`` (the reader stops there), and each line is parsed by
    :func:`loads` (nesting at most :data:`MAX_DEPTH`).

    Raises:
        JSONFileError: the file cannot be opened, or a line is longer than
            ``max_line_bytes``, not UTF-8 or not strict JSON (``path:line: reason``).
    """
    try:
        fh = open(path, "rb")
    except OSError as exc:
        raise JSONFileError(path, f"cannot read ({exc.strerror or exc})") from None
    with fh:
        for n, raw in raw_lines(fh, max_line_bytes):
            if raw is None:
                raise JSONFileError(
                    path, f"line longer than {max_line_bytes} bytes (not read further)", n
                )
            if not raw.strip():
                continue
            try:
                yield n, loads(raw)  # decoded (UTF-8) after the depth check
            except ValueError as exc:
                raise JSONFileError(path, _decode_error(exc), n) from None


def raw_lines(fh: Any, max_line_bytes: int) -> Iterator[tuple[int, bytes | None]]:
    """``(line_number, bytes)`` for each line of the binary file ``fh`` (1-based), ``None``
    in place of a line longer than ``max_line_bytes``; the rest of such a line is read
    (in 1 MiB pieces, not kept) only when the caller asks for the next line."""
    n = 0
    while raw := fh.readline(max_line_bytes + 1):
        n += 1
        if len(raw) > max_line_bytes:
            yield n, None
            while not raw.endswith(b"\n") and (raw := fh.readline(1 << 20)):
                pass
            continue
        yield n, raw
