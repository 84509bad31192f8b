"""How the files the project writes evolve, so that old results stay readable.

Two kinds of change, two rules:

* **Added field** (additive, no ``schema_version`` bump): the schema may require the new
  field, and a file written before it was added lacks it.  Every such field is listed in
  :data:`ADDED_FIELDS`; its default, the one the code uses, is the ``default`` of the
  property in the kind's schema (for ``train_config`` the dataclass default, from which
  that schema is generated); :func:`upgrade` fills it in before the schema is checked, so the file
  validates and readers see the same value the code assumed when it was written.
* **Breaking change** (a field renamed, removed or re-typed): the kind's version in
  :data:`CURRENT` is bumped and a migration from the previous version is registered in
  :data:`MIGRATIONS` (``(kind, old_version) -> fn(obj) -> obj`` giving the next
  version).  :func:`upgrade` chains them; a file of a version with no path to the current
  one, or of a newer version than this ragen knows, is refused with one line.

A test validates every committed run directory, board and example, so a change that
makes one of them invalid fails until it is listed here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

#: The ``schema_version`` each kind of file has now (files without one: ``None``).
CURRENT: dict[str, int | None] = {
    "episode": 1,
    "summary": 1,
    "run": 1,
    "leaderboard": 1,
    "metrics": None,
    "train_config": None,
    "train_summary": None,
    "agent_protocol": 1,
    "suite": 1,
}

#: Fields added to a kind since its files were first written (dotted paths).  Each one's
#: default is written once, as the ``default`` of its property in the kind's schema
#: (:func:`added_fields`); ``train_config``'s schema is generated from
#: :class:`ragen_train.config.StarPOConfig` (``scripts/config_reference.py``), so its
#: defaults are the dataclass defaults.
ADDED_FIELDS: dict[str, tuple[str, ...]] = {
    "train_config": (
        "env.train",  # multi-env StarPO
        "env.val",
        "algorithm.filter.scope",
        "optim.lr_schedule",  # LR schedules
        "optim.min_lr_ratio",
        "trainer.degenerate_warn_rate",
        "trainer.degenerate_stop_steps",
        "model.mixed_precision",  # bf16 compute over float32 masters
        "trainer.dist_timeout_s",  # collective timeout
        "trainer.update_path",  # the update's log-prob path
        "trainer.max_tokens_per_microbatch",
    ),
}


def schema_default(kind: str, path: str) -> Any:
    """The ``default`` of dotted property ``path`` in the schema of ``kind``
    (``schema_default("train_config", "optim.lr_schedule") == "constant"``).

    Raises:
        KeyError: the schema has no such property, or it declares no default (named).
    """
    from ragen_envs.resources import load_schema

    node: Any = load_schema(kind)
    for key in path.split("."):
        props = node.get("properties", {}) if isinstance(node, dict) else {}
        if key not in props:
            raise KeyError(f"{kind} schema has no property {path!r}")
        node = props[key]
    if "default" not in node:
        raise KeyError(f"{kind} schema gives {path!r} no default")
    return node["default"]


def added_fields(kind: str) -> tuple[tuple[str, Any], ...]:
    """``(dotted path, default)`` of every field added to ``kind`` (:data:`ADDED_FIELDS`),
    the defaults read from the kind's schema (:func:`schema_default`)."""
    return tuple((path, schema_default(kind, path)) for path in ADDED_FIELDS.get(kind, ()))


#: Fields renamed in a kind without a ``schema_version`` bump: ``(old dotted path, new)``.
#: An old file's value moves to the new name when the new one is absent.  The
#: ``train_config`` renames are written only here: :data:`ragen_train.config.RENAMED_FIELDS`
#: (which accepts the old name in configs and overrides with a warning for one release) is
#: built from them.
RENAMED_FIELDS: dict[str, tuple[tuple[str, str], ...]] = {
    "train_config": (("rollout.engine", "rollout.sampler"),),  # one concept, one name
}

#: ``(kind, version) -> migration`` to ``version + 1`` (none yet: no version was bumped).
MIGRATIONS: dict[tuple[str, int], Callable[[dict[str, Any]], dict[str, Any]]] = {}


class SchemaVersionError(ValueError):
    """A file's ``schema_version`` cannot be read by this ragen (one line)."""


def _rename(obj: dict[str, Any], old: str, new: str) -> None:
    *parents, leaf = old.split(".")
    *new_parents, new_leaf = new.split(".")
    if new_parents != parents:
        raise ValueError(f"{old} -> {new}: a rename stays within its section")
    node: Any = obj
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
    if isinstance(node, dict) and leaf in node and new_leaf not in node:
        node[new_leaf] = node.pop(leaf)


def _fill(obj: dict[str, Any], path: str, default: Any) -> None:
    *parents, leaf = path.split(".")
    node: Any = obj
    for key in parents:
        node = node.get(key) if isinstance(node, dict) else None
        if not isinstance(node, dict):
            return  # the section itself is missing: the schema reports that
    if leaf not in node:
        node[leaf] = copy.deepcopy(default)


def upgrade(obj: Any, kind: str) -> Any:
    """Bring a parsed file up to the current version of ``kind``, in place: run the
    migrations from its ``schema_version`` on, move :data:`RENAMED_FIELDS` to their new names,
    then fill :data:`ADDED_FIELDS` it lacks.

    Returns:
        ``obj`` (the same object, upgraded; a non-dict is returned as is).
    Raises:
        SchemaVersionError: a newer ``schema_version`` than this ragen reads, or an
            older one without a migration.
    """
    if not isinstance(obj, dict):
        return obj
    current = CURRENT.get(kind)
    if current is not None and "schema_version" in obj:
        version = obj["schema_version"]
        if not isinstance(version, int) or version > current:
            raise SchemaVersionError(
                f"schema_version {version!r} is not supported (this ragen reads {kind} files "
                f"of schema_version {current}; a newer ragen may have written it)"
            )
        while version < current:
            step = MIGRATIONS.get((kind, version))
            if step is None:
                raise SchemaVersionError(
                    f"schema_version {version} of a {kind} file has no migration to "
                    f"{version + 1} (this ragen reads schema_version {current})"
                )
            migrated = step(obj)
            obj.clear()
            obj.update(migrated)
            version += 1
            obj["schema_version"] = version
    for old_path, new_path in RENAMED_FIELDS.get(kind, ()):
        _rename(obj, old_path, new_path)
    for path, default in added_fields(kind):
        _fill(obj, path, default)
    return obj


__all__ = [
    "ADDED_FIELDS",
    "CURRENT",
    "MIGRATIONS",
    "RENAMED_FIELDS",
    "SchemaVersionError",
    "added_fields",
    "schema_default",
    "upgrade",
]
