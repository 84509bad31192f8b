"""Locating the JSON Schemas that ship with the project.

The repository keeps every schema in the top-level ``schemas/`` folder (the single
source of truth).  Wheels copy that folder into ``ragen_envs/schemas`` (see
``pyproject.toml`` and ``packaging/ragen-envs/pyproject.toml``); a source checkout or an
editable install reads the top-level folder directly.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent


@functools.cache
def schema_dir() -> Path:
    """Return the folder that holds ``envs/`` and the project-level schemas.

    Raises:
        FileNotFoundError: neither the packaged copy nor the source folder exists.
    """
    for candidate in (_PACKAGE_DIR / "schemas", _PACKAGE_DIR.parent / "schemas"):
        if (candidate / "envs").is_dir():
            return candidate
    raise FileNotFoundError(
        "ragen schemas not found: expected ragen_envs/schemas (installed wheel) or "
        "schemas/ beside ragen_envs (source checkout)"
    )


@functools.cache
def _load(path: str) -> Any:
    with open(path, encoding="utf-8") as fh:
        return json.load(fh)


def load_schema(name: str) -> dict[str, Any]:
    """Load a schema by its path relative to :func:`schema_dir`, e.g. ``"envs/sokoban.config"``.

    The ``.schema.json`` suffix is added when missing.

    Raises:
        FileNotFoundError: no such schema.
    """
    rel = name if name.endswith(".json") else f"{name}.schema.json"
    path = schema_dir() / rel
    if not path.is_file():
        raise FileNotFoundError(f"no schema {rel!r} in {schema_dir()}")
    return _load(str(path))
