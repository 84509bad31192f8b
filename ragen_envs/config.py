"""Environment configuration: JSON-Schema validation with defaults and field-naming errors.

Every environment has a config schema ``envs/<env>.config`` (the file
``ragen_envs/envs/<env>/config.schema.json``, see :mod:`ragen_envs.resources`).  Its
top-level ``properties`` (directly or through a ``$ref`` into
``schemas/envs/common.config.schema.json``) carry a ``default`` each, so a config is
complete once validated.
"""

from __future__ import annotations

import copy
import functools
import math
from collections.abc import Mapping
from typing import Any

import jsonschema
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

from .resources import all_schemas, load_schema


class ConfigError(ValueError):
    """A configuration value is missing, unknown or of the wrong type or range.

    Attributes:
        env: the environment key (``"sokoban"``) or schema name.
        field: dotted path of the offending field (``"dim_room[0]"``), or ``""`` for
            the config as a whole.
        reason: what is wrong with it.
    """

    def __init__(self, env: str, field: str, reason: str):
        self.env = env
        self.field = field
        self.reason = reason
        where = f"field {field!r}" if field else "config"
        super().__init__(f"{env}: invalid {where}: {reason}")


@functools.cache
def _registry() -> Registry:
    """Every schema (:func:`ragen_envs.resources.all_schemas`: ``schemas/`` and the env
    packages), keyed by name (``"envs/sokoban.config.schema.json"``) and by ``$id``."""
    resources = []
    for rel in all_schemas():
        schema = load_schema(rel)
        resource = Resource.from_contents(schema, default_specification=DRAFT202012)
        resources.append((rel, resource))
        if "$id" in schema and schema["$id"] != rel:
            resources.append((schema["$id"], resource))
    return Registry().with_resources(resources)


def _is_finite_number(checker: Any, instance: Any) -> bool:
    """JSON Schema ``number``, finite only: RFC 8259 JSON has no NaN or Infinity, and a
    NaN passes every ``minimum``/``maximum`` (all comparisons with NaN are false)."""
    return jsonschema.Draft202012Validator.TYPE_CHECKER.is_type(instance, "number") and (
        not isinstance(instance, float) or math.isfinite(instance)
    )


@functools.cache
def _strict(cls: type[Any]) -> type[Any]:
    """``cls`` with a ``number`` type that refuses ``NaN`` and infinities."""
    return jsonschema.validators.extend(
        cls, type_checker=cls.TYPE_CHECKER.redefine("number", _is_finite_number)
    )


@functools.cache
def schema_validator(name: str) -> jsonschema.protocols.Validator:
    """A cached validator for schema ``name`` (e.g. ``"episode"``, ``"envs/sokoban.info"``), with ``$ref``
    resolution across the env schemas.  Its ``number`` type refuses ``NaN`` and
    infinities (``"nan is not of type 'number'"``)."""
    return validator_for_schema(load_schema(name))


def validator_for_schema(schema: Mapping[str, Any]) -> jsonschema.protocols.Validator:
    """A validator for a schema given as a dict (``$ref`` into ``schemas/`` resolved; the
    ``number`` type refuses ``NaN`` and infinities, as :func:`schema_validator`).

    Raises:
        jsonschema.SchemaError: ``schema`` is not a valid schema.
    """
    cls = jsonschema.validators.validator_for(schema, default=jsonschema.Draft202012Validator)
    cls.check_schema(schema)
    return _strict(cls)(schema, registry=_registry(), format_checker=cls.FORMAT_CHECKER)


def _resolve(node: Mapping[str, Any]) -> Mapping[str, Any]:
    """Follow a local ``{"$ref": "file#/$defs/x"}`` so that defaults can be read."""
    ref = node.get("$ref")
    if not ref:
        return node
    resolved = _registry().resolver().lookup(ref).contents
    merged = dict(resolved)
    merged.update({k: v for k, v in node.items() if k != "$ref"})
    return merged


@functools.cache
def config_defaults(env: str) -> dict[str, Any]:
    """The default config of environment ``env`` (every top-level ``default``)."""
    schema = load_schema(f"envs/{env}.config")
    out: dict[str, Any] = {}
    for key, prop in schema.get("properties", {}).items():
        prop = _resolve(prop)
        if "default" in prop:
            out[key] = prop["default"]
    return out


def _field_path(error: jsonschema.ValidationError) -> str:
    parts: list[str] = []
    for p in error.absolute_path:
        parts.append(f"[{p}]" if isinstance(p, int) else (f".{p}" if parts else str(p)))
    return "".join(parts)


def validate_config(env: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """Validate ``config`` for environment ``env`` and return it completed with defaults.

    Args:
        env: environment key, e.g. ``"sokoban"`` (schema ``envs/sokoban.config``).
        config: user-supplied values; unknown keys are rejected.

    Returns:
        A new dict: defaults overlaid with ``config`` (tuples turned into lists).

    Raises:
        ConfigError: naming the first offending field (the most specific error that
            ``jsonschema.exceptions.best_match`` reports).
    """
    merged = copy.deepcopy(config_defaults(env))
    merged.update(_to_json(dict(config)))
    error = jsonschema.exceptions.best_match(
        schema_validator(f"envs/{env}.config").iter_errors(merged)
    )
    if error is not None:
        field = _field_path(error)
        if error.validator == "additionalProperties":
            extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
            known = ", ".join(sorted(error.schema.get("properties", {})))
            raise ConfigError(env, ".".join(extra), f"unknown field (known fields: {known})")
        if error.validator == "required":
            raise ConfigError(env, field, error.message)
        if isinstance(error.instance, float) and not math.isfinite(error.instance):
            raise ConfigError(env, field, f"must be a finite number, got {error.instance!r}")
        raise ConfigError(env, field, f"{error.message} (schema rule {error.validator!r})")
    return merged


def _to_json(value: Any) -> Any:
    """Turn tuples into lists so that JSON Schema ``array`` accepts them."""
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_to_json(v) for v in value]
    return value


def validate_info(env: str, info: Mapping[str, Any]) -> None:
    """Validate a step/reset ``info`` dict against schema ``envs/<env>.info``
    (``ragen_envs/envs/<env>/info.schema.json``).

    Raises:
        jsonschema.ValidationError: the info does not follow the env's info schema.
    """
    schema_validator(f"envs/{env}.info").validate(_to_json(dict(info)))
