"""Locating the JSON Schemas that ship with the project.

Two places, one name space:

* each environment's config and info schemas live in its package,
  ``ragen_envs/envs/<key>/config.schema.json`` and ``info.schema.json``; they are named
  ``envs/<key>.config`` and ``envs/<key>.info`` (as if they were in ``schemas/envs/``);
* every other schema (the shared ``envs/common.*``, episodes, summaries, leaderboards,
  the trainer config, data provenance) lives in the top-level ``schemas/`` folder.
  Wheels copy that folder into ``ragen_envs/schemas`` (see ``pyproject.toml`` and
  ``packaging/ragen-envs/pyproject.toml``); a source checkout or an editable install
  reads the top-level folder directly.

An env whose package has no schema files yet falls back to
``schemas/envs/<key>.{config,info}.schema.json``.
"""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

_PACKAGE_DIR = Path(__file__).resolve().parent

#: The folder of the env packages (``ragen_envs/envs/<key>/``).
ENVS_DIR = _PACKAGE_DIR / "envs"

_ENV_SCHEMA = re.compile(r"envs/(?P<key>[A-Za-z0-9_]+)\.(?P<kind>config|info)\.schema\.json")


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


def package_schemas() -> dict[str, Path]:
    """The schemas held by env packages: name (``"envs/sokoban.config.schema.json"``) -> file."""
    out: dict[str, Path] = {}
    for path in sorted(ENVS_DIR.glob("*/*.schema.json")):
        kind = path.name.removesuffix(".schema.json")
        if kind in ("config", "info"):
            out[f"envs/{path.parent.name}.{kind}.schema.json"] = path
    return out


def all_schemas() -> dict[str, Path]:
    """Every schema by name (relative to ``schemas/``, ``.schema.json`` included) -> file.

    The env packages' schemas (:func:`package_schemas`) win over a file of the same
    name under :func:`schema_dir`.
    """
    root = schema_dir()
    out = {p.relative_to(root).as_posix(): p for p in sorted(root.rglob("*.schema.json"))}
    out.update(package_schemas())
    return out


def schema_path(name: str) -> Path:
    """The file of schema ``name`` (e.g. ``"envs/sokoban.config"``; ``.schema.json`` optional).

    ``envs/<key>.config`` / ``envs/<key>.info`` are read from the env package
    (``ragen_envs/envs/<key>/config.schema.json``) when it has the file, else from
    :func:`schema_dir`; every other name from :func:`schema_dir`.

    Raises:
        FileNotFoundError: no such schema (the message names both places looked in).
    """
    rel = name if name.endswith(".json") else f"{name}.schema.json"
    match = _ENV_SCHEMA.fullmatch(rel)
    if match:
        packaged = ENVS_DIR / match["key"] / f"{match['kind']}.schema.json"
        if packaged.is_file():
            return packaged
    path = schema_dir() / rel
    if not path.is_file():
        where = f"{ENVS_DIR / match['key']} or {schema_dir()}" if match else str(schema_dir())
        raise FileNotFoundError(f"no schema {rel!r} in {where}")
    return path


def load_schema(name: str) -> dict[str, Any]:
    """Load schema ``name``, e.g. ``"envs/sokoban.config"`` (found by :func:`schema_path`).

    The ``.schema.json`` suffix is added when missing.

    Raises:
        FileNotFoundError: no such schema.
    """
    return _load(str(schema_path(name)))
