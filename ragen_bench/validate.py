"""``ragen-bench validate PATH``: check any file the project writes (or a directory's files)
against its JSON Schema.

Directories it recognises (:func:`dir_files`): a ``ragen-bench`` run directory
(``run.json``), a ``ragen-train`` output directory (a training ``config.json``:
``config.json``, ``metrics.jsonl``, ``sft/metrics.jsonl``, ``summary.json`` and the
``ragen_protocol.json`` of every model folder in it) and a saved model folder
(``ragen_protocol.json``), and a suite folder (``suite.json``, then each run's files).  A file's schema is told by its name and, where names are
shared (``config.json``, ``summary.json``), by its shape.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema

from ragen_envs import jsonutil
from ragen_envs.config import schema_validator

from .schema_versions import CURRENT, SchemaVersionError, upgrade

#: File name -> schema (relative to ``schemas/``).
BY_NAME = {
    "episodes.jsonl": "episode",
    "summary.json": "summary",
    "run.json": "run",
    "metrics.jsonl": "metrics",
    "ragen_protocol.json": "agent_protocol",
    "suite.json": "suite",
}
KINDS = (
    "episode",
    "summary",
    "run",
    "leaderboard",
    "metrics",
    "train_config",
    "train_summary",
    "agent_protocol",
    "suite",
)
#: Keys every ``ragen-train`` ``config.json`` has (a Hugging Face model's config.json has none of them).
TRAIN_CONFIG_KEYS = frozenset({"env", "rollout", "trainer"})


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


def _is_training_config(path: Path) -> bool:
    try:
        data = jsonutil.read_json(path)
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and TRAIN_CONFIG_KEYS <= set(data)


def dir_files(path: str | Path) -> list[tuple[Path, str | None]]:
    """``(file, schema kind or None = tell by name)`` for every checkable file of a directory.

    A run directory: :func:`run_dir_files` (each listed even when missing).  A training
    output directory (marked by its training ``config.json``, kind ``train_config``):
    that file, then whichever of ``metrics.jsonl``,
    ``sft/metrics.jsonl``, ``summary.json`` (``train_summary``) and the model folders'
    ``ragen_protocol.json`` exist.  A model folder: its ``ragen_protocol.json``.  A folder
    of leaderboards (``leaderboards/``: no ``run.json``, boards as ``*.json``): each board.

    Raises:
        ValueError: none of these ("not a run directory (no run.json)", as :func:`run_dir_files`).
    """
    p = Path(path)
    if _is_training_config(p / "config.json"):
        files: list[tuple[Path, str | None]] = [(p / "config.json", "train_config")]
        for rel, kind in (
            ("metrics.jsonl", "metrics"),
            ("sft/metrics.jsonl", "metrics"),
            ("summary.json", "train_summary"),
        ):
            if (p / rel).is_file():
                files.append((p / rel, kind))
        models = [
            p / "sft_model",
            p / "final_model",
            *sorted((p / "checkpoints").glob("step_*/model")),
        ]
        files += [
            (m / "ragen_protocol.json", "agent_protocol")
            for m in models
            if (m / "ragen_protocol.json").is_file()
        ]
        return files
    if (p / "ragen_protocol.json").is_file():
        return [(p / "ragen_protocol.json", "agent_protocol")]
    if (p / "suite.json").is_file():  # a suite folder: suite.json, then each run's files
        files = [(p / "suite.json", "suite")]
        for run in read_suite_file(p / "suite.json")["runs"]:
            files += [(f, None) for f in run_dir_files(p / run["run_id"])]
        return files
    if not (p / "run.json").is_file() and (boards := _board_files(p)):
        return [(b, "leaderboard") for b in boards]
    return [(f, None) for f in run_dir_files(p)]  # raises: not a run directory (no run.json)


def _board_files(p: Path) -> list[Path]:
    """The leaderboard files directly in folder ``p`` (``*.json`` that :func:`detect_kind`
    tells as ``leaderboard``), sorted by name; unreadable files and files of other kinds
    are left out."""
    boards = []
    for f in sorted(p.glob("*.json")):
        try:
            if detect_kind(f, jsonutil.read_json(f)) == "leaderboard":
                boards.append(f)
        except (OSError, ValueError):  # unreadable, or no kind it can tell
            continue
    return boards


def detect_kind(path: Path, first: Any = None) -> str:
    """Guess the schema of ``path`` from its name, else from its content.

    Raises:
        ValueError: the kind cannot be told; pass ``kind`` explicitly.
    """
    if isinstance(first, dict) and TRAIN_CONFIG_KEYS <= set(first):
        return "train_config"  # a ragen-train config.json (or any file holding one)
    if (
        path.name == "summary.json"
        and isinstance(first, dict)
        and "final_model_dir" in first
        and "counts" not in first
    ):
        return "train_summary"  # ragen-train quickstart's summary.json, not a ragen-bench run's
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


class InvalidFileError(ValueError):
    """A file the project reads does not follow its schema (one line: ``path[:line]: at 'where': why``)."""


#: The ``schema_version`` each kind of file has (:data:`ragen_bench.schema_versions.CURRENT`).
SCHEMA_VERSIONS = CURRENT


def check_object(obj: Any, kind: str, where: str, validator: Any = None) -> Any:
    """Upgrade one parsed object to the current version of schema ``kind``
    (:func:`ragen_bench.schema_versions.upgrade`: migrations, then defaults of fields
    added since it was written; in place) and check it; ``where`` (``path`` or
    ``path:line``) starts the message.

    Returns:
        ``obj``, upgraded.
    Raises:
        InvalidFileError: an unsupported ``schema_version`` (a newer ragen wrote the file,
            or no migration exists), else the first (most specific) schema violation.
    """
    try:
        upgrade(obj, kind)
    except SchemaVersionError as exc:
        raise InvalidFileError(f"{where}: {exc}") from None
    err = jsonschema.exceptions.best_match((validator or schema_validator(kind)).iter_errors(obj))
    if err is not None:
        at = "/".join(str(x) for x in err.absolute_path)
        raise InvalidFileError(f"{where}: at '{at}': {err.message}")
    return obj


def read_checked(path: str | Path, kind: str) -> Any:
    """The JSON document in ``path``, checked against schema ``kind``.

    Raises:
        ragen_envs.jsonutil.JSONFileError: unreadable or not strict JSON (names file and line).
        InvalidFileError: it does not follow the schema, or has an unknown ``schema_version``.
    """
    obj = jsonutil.read_json(path)
    check_object(obj, kind, str(path))
    return obj


def validate_file(path: str | Path, kind: str | None = None) -> tuple[str, int]:
    """Validate a JSON or JSONL file.

    Returns:
        ``(kind, objects_checked)``.

    Raises:
        InvalidFileError: a schema violation (the line number for JSONL files in the message).
        ValueError: unreadable JSON (including ``NaN``/``Infinity``, which RFC 8259 JSON
            does not have and a schema cannot see after parsing; the message names the
            file and line), or unknown kind.
    """
    p = Path(path)
    if p.suffix == ".jsonl":
        objs = list(jsonutil.iter_jsonl(p))
        kind = kind or detect_kind(p, objs[0][1] if objs else None)
        validator = schema_validator(kind)
        for n, obj in objs:
            check_object(obj, kind, f"{p}:{n}", validator)
        return kind, len(objs)
    obj = jsonutil.read_json(p)
    kind = kind or detect_kind(p, obj)
    check_object(obj, kind, str(p))
    return kind, 1


def read_suite_file(path: str | Path) -> dict[str, Any]:
    """A suite folder's ``suite.json``, checked against ``schemas/suite.schema.json``, with
    every member run id a plain directory name inside the folder
    (:func:`ragen_bench.run_ids.check_run_id`).

    Raises:
        ValueError: a damaged file or a member run id that is not a plain directory name
            (one line naming the file).
    """
    from .run_ids import check_run_id

    meta = read_checked(Path(path), "suite")
    for run in meta["runs"]:
        try:
            check_run_id(run["run_id"])
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
    return meta
