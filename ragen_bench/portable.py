"""Paths as a published file records them: relative to the repository, or a folder's name.

Files the project publishes (leaderboard rows, committed example results, benchmark JSON) must
not carry the absolute paths of the machine that built them (a home folder, a scratch disk):
they mean nothing on a reader's machine and they name the builder's layout.  Run folders that
a user resumes on their own machine keep their absolute paths; only what is published goes
through :func:`portable_json`.
"""

from __future__ import annotations

import os
from pathlib import Path, PurePosixPath
from typing import Any


def _looks_absolute(value: str) -> bool:
    """An absolute POSIX path with at least two components, no whitespace (not ``/v1``)."""
    return (
        value.startswith("/")
        and not any(ch.isspace() for ch in value)
        and len(PurePosixPath(value).parts) > 2
    )


def portable_path(value: str, root: str | Path | None = None) -> str:
    """``value`` as a published file should record it.

    - a path inside ``root`` (default: the current directory) becomes relative to it;
    - any other absolute path becomes its last component (a model folder's name, such as
      ``qwen2.5-coder-0.5b-instruct``; its fingerprint, where one exists, is recorded beside it);
    - anything else (a hub id, a relative path, a plain name) is returned unchanged.
    """
    if not _looks_absolute(value):
        return value
    base = Path(root if root is not None else os.getcwd()).resolve()
    path = PurePosixPath(value)
    try:
        return str(path.relative_to(PurePosixPath(str(base))))
    except ValueError:
        return path.name


def portable_json(obj: Any, root: str | Path | None = None) -> Any:
    """A copy of a JSON-like ``obj`` with every absolute path string made portable
    (:func:`portable_path`); dict keys, numbers and other strings are kept."""
    if isinstance(obj, dict):
        return {k: portable_json(v, root) for k, v in obj.items()}
    if isinstance(obj, list):
        return [portable_json(v, root) for v in obj]
    if isinstance(obj, str):
        return portable_path(obj, root)
    return obj
