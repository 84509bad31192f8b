"""``ragen-bench validate PATH``: check any file the project writes (or a run directory's
files) against its JSON Schema."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema

from ragen_envs.config import schema_validator

#: File name -> schema (relative to ``schemas/``).
BY_NAME = {"episodes.jsonl": "episode", "summary.json": "summary", "run.json": "run"}
KINDS = ("episode", "summary", "run", "leaderboard", "metrics", "train_config")


def run_dir_files(path: str | Path) -> list[Path]:
    """The files of run directory ``path`` that have schemas, in the order to check them.

    They are ``run.json``, ``episodes.jsonl`` and ``summary.json`` (:data:`BY_NAME`),
    listed whether or not they exist; other entries (``.lock``, temporary files) are
    not listed.

    Raises:
        ValueError: ``path`` has no ``run.json`` (it is not a run directory).
    """
    p = Path(path)
    if not (p / "run.json").is_file():
        raise ValueError(f"{p} is a directory but not a run directory (no run.json)")
    return [p / name for name in ("run.json", "episodes.jsonl", "summary.json")]


def detect_kind(path: Path, first: Any = None) -> str:
    """Guess the schema of ``path`` from its name, else from its content.

    Raises:
        ValueError: the kind cannot be told; pass ``kind`` explicitly.
    """
    if path.name in BY_NAME:
        return BY_NAME[path.name]
    if path.suffix == ".jsonl":
        if isinstance(first, dict) and "episode_index" in first:
            return "episode"
        if isinstance(first, dict) and "step" in first:
            return "metrics"
    if isinstance(first, dict):
        if "entries" in first and "envs" in first:
            return "leaderboard"
        if "metrics" in first and "counts" in first:
            return "summary"
    raise ValueError(f"cannot tell which schema {path} follows; pass --schema ({', '.join(KINDS)})")


def validate_file(path: str | Path, kind: str | None = None) -> tuple[str, int]:
    """Validate a JSON or JSONL file.

    Returns:
        ``(kind, objects_checked)``.

    Raises:
        jsonschema.ValidationError: with the line number for JSONL files in the message.
        ValueError: unreadable JSON, or unknown kind.
    """
    p = Path(path)
    text = p.read_text(encoding="utf-8")
    if p.suffix == ".jsonl":
        lines = [(n, line) for n, line in enumerate(text.splitlines(), 1) if line.strip()]
        objs = []
        for n, line in lines:
            try:
                objs.append((n, json.loads(line)))
            except ValueError as exc:
                raise ValueError(f"{p}:{n}: invalid JSON ({exc})") from None
        kind = kind or detect_kind(p, objs[0][1] if objs else None)
        validator = schema_validator(kind)
        for n, obj in objs:
            err = jsonschema.exceptions.best_match(validator.iter_errors(obj))
            if err is not None:
                where = "/".join(str(x) for x in err.absolute_path)
                raise jsonschema.ValidationError(f"{p}:{n}: at '{where}': {err.message}")
        return kind, len(objs)
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{p}: invalid JSON ({exc})") from None
    kind = kind or detect_kind(p, obj)
    err = jsonschema.exceptions.best_match(schema_validator(kind).iter_errors(obj))
    if err is not None:
        where = "/".join(str(x) for x in err.absolute_path)
        raise jsonschema.ValidationError(f"{p}: at '{where}': {err.message}")
    return kind, 1
