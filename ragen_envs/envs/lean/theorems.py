"""Lean theorems as data: the record format, its loader and the split rule (spec: ``docs/envs/lean.md``).

A theorem record is a JSON object with

``name`` (required)
    the theorem's name; it identifies the item and decides its split.
``formal_statement`` (required)
    the Lean 4 statement, ending in ``:= by`` (a trailing ``:=`` gets `` by``); the
    proof's tactics follow it, indented by two spaces.
``header`` (optional)
    imports, options and ``open`` lines checked before the statement; when absent, the
    env config's ``default_header`` (miniF2F's Mathlib header).
``informal_prefix`` (optional)
    the problem in natural language, usually as a Lean doc comment ``/-- ... -/``.
``goal`` (optional)
    the initial goal as Lean pretty-printed it (shown before the first check).
``split`` (optional)
    the source's split: miniF2F's ``valid`` / ``validation`` half, ``train`` or ``test``.

:func:`load_theorems` reads any data source that :func:`ragen_envs.data.loaders.load_source`
understands (``builtin:minif2f`` is the copy shipped in ``data/``) and refuses a bad
record with a one-line :class:`~ragen_envs.data.loaders.DataSourceError` naming the
source, the record (and its line, for a local JSONL file) and the field.

Splits (:func:`source_split`): miniF2F has no training half, so its ``valid`` half is
divided by a keyed hash of the theorem name, 80 % ``train`` and 20 % ``validation``
(disjoint by name, the same in every process), and its ``test`` half is ``test``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...data.loaders import DataSourceError, load_source
from ...data.splits import canonical_key
from ...seeding import split_position

__all__ = [
    "BUILTIN_SOURCES",
    "MINIF2F_HEADER",
    "VALIDATION_SHARE",
    "Theorem",
    "line_of_record",
    "load_theorems",
    "source_split",
    "theorem_from_record",
]

DATA_DIR = Path(__file__).resolve().parent / "data"

#: ``builtin:<name>`` data sources shipped with this package (with provenance sidecars).
BUILTIN_SOURCES = {"minif2f": DATA_DIR / "minif2f.jsonl"}

#: The header of every miniF2F record (Mathlib, Aesop, no heartbeat limit, the usual opens).
MINIF2F_HEADER = (
    "import Mathlib\nimport Aesop\n\nset_option maxHeartbeats 0\n\n"
    "open BigOperators Real Nat Topology Rat\n\n"
)

#: Share of a source's ``valid`` half that becomes ``validation`` (the rest is ``train``).
VALIDATION_SHARE = 0.2

_VALID_NAMES = {"valid", "validation", "val", "dev"}
_SPLIT_PERSON_PREFIX = "lean-valid-half:"


@dataclass(frozen=True)
class Theorem:
    """One theorem to prove.

    Attributes:
        name: its name (the item id).
        statement: the formal statement, ending in ``:= by`` and a newline.
        header: Lean text checked before it (may be empty).
        informal: the natural-language problem (doc-comment markers removed), or ``""``.
        goal: the initial goal as recorded in the data, or ``None``.
        split: the source's split name (``"valid"``, ``"test"``, ...), or ``None``.
    """

    name: str
    statement: str
    header: str
    informal: str = ""
    goal: str | None = None
    split: str | None = None


def _informal(text: str) -> str:
    text = text.strip()
    if text.startswith("/--"):
        text = text[3:]
    elif text.startswith("/-"):
        text = text[2:]
    if text.endswith("-/"):
        text = text[:-2]
    return text.strip()


def _bad(where: str, message: str) -> DataSourceError:
    return DataSourceError(f"{where}: {message}")


def theorem_from_record(
    record: Mapping[str, Any], *, default_header: str, where: str = "record"
) -> Theorem:
    """Build a :class:`Theorem` from one record (see the module docstring).

    Raises:
        DataSourceError: a required field is missing, a field has the wrong type, or the
            statement does not end in ``:= by``; the message starts with ``where``.
    """
    if not isinstance(record, Mapping):
        raise _bad(where, f"expected a JSON object, got {type(record).__name__}")
    for key in ("name", "formal_statement"):
        if key not in record:
            raise _bad(
                where, f"missing field {key!r} (a theorem record needs name and formal_statement)"
            )
    for key in ("name", "formal_statement", "header", "informal_prefix", "goal", "split"):
        value = record.get(key)
        if value is not None and not isinstance(value, str):
            raise _bad(where, f"field {key!r} must be a string, got {type(value).__name__}")
    name = record["name"].strip()
    if not name:
        raise _bad(where, "field 'name' is empty")
    statement = record["formal_statement"].rstrip()
    if statement.endswith(":="):
        statement += " by"
    if not statement.endswith(":= by"):
        raise _bad(
            where,
            f"field 'formal_statement' of {name!r} must end in ':= by' (the proof is tactics), "
            f"got ...{statement[-40:]!r}",
        )
    header = record.get("header")
    header = default_header if header is None else header
    if header and not header.endswith("\n"):
        header += "\n"
    return Theorem(
        name=name,
        statement=statement + "\n",
        header=header,
        informal=_informal(record.get("informal_prefix") or ""),
        goal=record.get("goal"),
        split=record.get("split"),
    )


def line_of_record(path: Path, index: int) -> int | None:
    """1-based line number of the ``index``-th (0-based) non-blank line of a JSONL file."""
    try:
        with open(path, encoding="utf-8") as fh:
            seen = -1
            for lineno, line in enumerate(fh, 1):
                if line.strip():
                    seen += 1
                    if seen == index:
                        return lineno
    except OSError:
        return None
    return None


def resolve_source(spec: str) -> str:
    """``builtin:<name>`` -> the shipped file's path; any other spec unchanged.

    Raises:
        DataSourceError: an unknown ``builtin:`` name.
    """
    if spec.startswith("builtin:"):
        name = spec[len("builtin:") :]
        if name not in BUILTIN_SOURCES:
            raise DataSourceError(
                f"no built-in Lean data set {name!r}; built-in: {', '.join(sorted(BUILTIN_SOURCES))}"
            )
        return str(BUILTIN_SOURCES[name])
    return spec


def load_theorems(spec: str, *, default_header: str = MINIF2F_HEADER) -> list[Theorem]:
    """Every theorem of a data source, in source order.

    Args:
        spec: ``builtin:minif2f`` or any :func:`ragen_envs.data.loaders.load_source` spec.
        default_header: the header of records without one.

    Raises:
        DataSourceError: unreadable source, a bad record (one line naming it), two
            records with the same name, or no record at all.
    """
    resolved = resolve_source(spec)
    records = load_source(resolved)
    path = Path(resolved[len("file:") :] if resolved.startswith("file:") else resolved).expanduser()
    jsonl = path.is_file() and path.name.lower().endswith((".jsonl", ".ndjson"))
    theorems: list[Theorem] = []
    seen: dict[str, int] = {}
    for i, record in enumerate(records):
        line = line_of_record(path, i) if jsonl else None
        where = f"{resolved}:{line}" if line is not None else f"{resolved}: record {i + 1}"
        theorem = theorem_from_record(record, default_header=default_header, where=where)
        if theorem.name in seen:
            raise _bad(
                where,
                f"theorem name {theorem.name!r} repeats record {seen[theorem.name] + 1} "
                "(names identify theorems and decide their split)",
            )
        seen[theorem.name] = i
        theorems.append(theorem)
    if not theorems:
        raise DataSourceError(f"{resolved}: no theorem records")
    return theorems


def source_split(theorem: Theorem) -> str | None:
    """The split a theorem's source gives it, after dividing a ``valid`` half (module docstring).

    Returns ``"train"`` / ``"validation"`` / ``"test"``, or ``None`` when the record names
    no known split (the data layer's hash split then decides).
    """
    split = (theorem.split or "").strip().lower()
    if split in _VALID_NAMES:
        pos = split_position(_SPLIT_PERSON_PREFIX + canonical_key(theorem.name))
        return "validation" if pos < VALIDATION_SHARE else "train"
    if split in ("train", "training"):
        return "train"
    if split in ("test", "testing"):
        return "test"
    return None
