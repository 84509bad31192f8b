"""One declaration per config field: :func:`setting` puts a field's help, range and choices
in its dataclass field's metadata, and :func:`field_specs` reads them back.

Everything about a training-config field is written once, where the field is declared::

    lr: float = setting(1e-6, "AdamW learning rate of the policy (RAGEN base.yaml: 1e-6).",
                        range=Range(gt=0))

and everything else is derived from that declaration: the runtime check
(:func:`ragen_train.config.validate`), the JSON Schema (``schemas/train_config.schema.json``,
with each field's ``description`` and ``default``), ``ragen-train show-config --explain``
and the reference page ``docs/config-reference.md`` (``scripts/config_reference.py``).

This module imports only the standard library and :class:`ragen_envs.ranges.Range`, so the
sections declared outside :mod:`ragen_train.sections` (:class:`ragen_train.filtering.FilterConfig`,
:class:`ragen_train.multienv.TrainEnv`) can use it without an import cycle.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from ragen_envs.ranges import Range

__all__ = ["FieldSpec", "field_specs", "json_schema", "setting", "type_text"]

#: ``choices`` may be a collection (a tuple, a registry read when a value is checked, so a
#: plug-in registered later is accepted) or a function returning one (imported lazily).
Choices = Collection[Any] | Callable[[], Collection[Any]]


def setting(
    default: Any = dataclasses.MISSING,
    help: str = "",  # noqa: A002 - the word the CLI and the docs use
    *,
    factory: Callable[[], Any] | None = None,
    range: Range | None = None,  # noqa: A002
    choices: Choices | None = None,
    item_choices: Choices | None = None,
    item_noun: str = "value",
    required: bool = True,
) -> Any:
    """A dataclass field declared with its documentation and its allowed values.

    Args:
        default: the default value (or ``factory`` for a mutable one).
        help: one line: what the field does, its unit, and where the default comes from
            (RAGEN's ``base.yaml``, a paper).  Required in spirit: a test checks every
            field of :class:`~ragen_train.config.StarPOConfig` has one.
        range: allowed numbers (``None`` values of optional fields are not checked).
        choices: allowed values of a scalar field.
        item_choices: allowed values of each item of a list field (an unknown item is
            reported as ``unknown {item_noun} 'x' (known: ...)``).
        required: whether the JSON Schema requires it in a config file. False for a field
            added after runs were published: their ``config.json`` lacks it, and loading
            fills in the default.

    Returns:
        a :func:`dataclasses.field`.
    """
    metadata = {
        "help": help,
        "range": range,
        "choices": choices,
        "item_choices": item_choices,
        "item_noun": item_noun,
        "required": required,
    }
    if factory is not None:
        return dataclasses.field(default_factory=factory, metadata=metadata)
    return dataclasses.field(default=default, metadata=metadata)


def _resolve(choices: Choices | None) -> list[Any] | None:
    if choices is None:
        return None
    if callable(choices) and not isinstance(choices, Collection):
        choices = choices()
    return list(choices)


@dataclass(frozen=True)
class FieldSpec:
    """One field as declared: dotted ``path`` (``optim.lr``; ``env.train[].weight`` for a field
    of a list's items), Python type, default, help, range and choices."""

    path: str
    type: Any
    default: Any
    help: str
    range: Range | None
    raw_choices: Choices | None
    raw_item_choices: Choices | None
    item_noun: str
    in_list: bool = False

    @property
    def choices(self) -> list[Any] | None:
        """The allowed values now (a registry is read at call time), or ``None``."""
        return _resolve(self.raw_choices)

    @property
    def item_choices(self) -> list[Any] | None:
        """The allowed values of each item of a list field now, or ``None``."""
        return _resolve(self.raw_item_choices)

    @property
    def section(self) -> str:
        """The dotted section (``optim``, ``rollout.vllm``); ``""`` for a top-level field."""
        return self.path.rsplit(".", 1)[0] if "." in self.path else ""

    def allowed_text(self) -> str:
        """The allowed values in words (``in [0, 1]``, ``one of: a, b``), or ``""``."""
        if self.choices is not None:
            return "one of: " + ", ".join(map(str, self.choices))
        if self.item_choices is not None:
            return "each one of: " + ", ".join(map(str, self.item_choices))
        if self.range is not None:
            text = self.range.describe()
            return text + (" (or null)" if _optional(self.type) else "")
        return ""

    def explain(self) -> str:
        """Several lines for ``ragen-train show-config --explain``: path, help, type, default,
        allowed values."""
        lines = [
            self.path,
            f"  {self.help}",
            f"  type:    {type_text(self.type)}",
            f"  default: {default_text(self.default)}",
        ]
        if self.allowed_text():
            lines.append(f"  allowed: {self.allowed_text()}")
        return "\n".join(lines)


def _optional(tp: Any) -> bool:
    return typing.get_origin(tp) in (typing.Union, types.UnionType) and type(None) in (
        typing.get_args(tp)
    )


def type_text(tp: Any) -> str:
    """A field type as written in docs: ``int``, ``float | null``, ``list[str]``, ``mapping``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(type_text(a) for a in args)
    if tp is type(None):
        return "null"
    if origin is list:
        return f"list[{type_text(args[0])}]" if args else "list"
    if origin is dict:
        return "mapping"
    if dataclasses.is_dataclass(tp):
        return tp.__name__
    return getattr(tp, "__name__", str(tp))


def default_text(value: Any) -> str:
    """A default as JSON text (``null``, ``true``, ``[]``, ``"full"``)."""
    if dataclasses.is_dataclass(value):
        value = dataclasses.asdict(value)
    if isinstance(value, list):
        value = [dataclasses.asdict(v) if dataclasses.is_dataclass(v) else v for v in value]
    return json.dumps(value)


def _default(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def field_specs(cls: type, prefix: str = "", *, in_list: bool = False) -> list[FieldSpec]:
    """Every leaf field of dataclass ``cls``, depth first in declaration order.

    A nested dataclass (a section) is entered, not listed; a ``list`` of dataclasses
    (``env.train``) is listed and its items' fields follow as ``env.train[].id`` etc.
    """
    hints = typing.get_type_hints(cls)
    out: list[FieldSpec] = []
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        path = f"{prefix}{f.name}"
        if dataclasses.is_dataclass(tp):
            out += field_specs(tp, path + ".", in_list=in_list)
            continue
        md = f.metadata
        out.append(
            FieldSpec(
                path=path,
                type=tp,
                default=_default(f),
                help=md.get("help", ""),
                range=md.get("range"),
                raw_choices=md.get("choices"),
                raw_item_choices=md.get("item_choices"),
                item_noun=md.get("item_noun", "value"),
                in_list=in_list,
            )
        )
        args = typing.get_args(tp)
        if typing.get_origin(tp) is list and args and dataclasses.is_dataclass(args[0]):
            out += field_specs(args[0], path + "[].", in_list=True)
    return out


def _value_schema(tp: Any, md: Any) -> dict[str, Any]:
    """The schema of a value of type ``tp`` declared with metadata ``md``."""
    origin, args = typing.get_origin(tp), typing.get_args(tp)
    if origin in (typing.Union, types.UnionType):
        return {"anyOf": [_value_schema(a, md) for a in args]}
    if tp is type(None):
        return {"type": "null"}
    if dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    choices = _resolve(md.get("choices"))
    if choices is not None:
        return {"enum": choices}
    bounds = md["range"].schema() if md.get("range") is not None else {}
    if tp is bool:
        return {"type": "boolean"}
    if tp is int:
        return {"type": "integer", **bounds}
    if tp is float:
        return {"type": "number", **bounds}
    if tp is str:
        return {"type": "string"}
    if origin is list:
        items = _resolve(md.get("item_choices"))
        if items is not None:
            return {"type": "array", "items": {"enum": items}}
        return {"type": "array", "items": _value_schema(args[0], {}) if args else {}}
    if origin is dict:
        return {"type": "object"}
    return {}


def _object_schema(cls: type) -> dict[str, Any]:
    hints = typing.get_type_hints(cls)
    props: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        prop = _value_schema(tp, f.metadata)
        if dataclasses.is_dataclass(tp):
            prop = {"description": section_help(tp), **prop}
        else:
            prop = {"description": f.metadata.get("help", ""), **prop}
            default = _default(f)
            prop["default"] = json.loads(default_text(default))
        props[f.name] = prop
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": props,
        "required": sorted(
            f.name for f in dataclasses.fields(cls) if f.metadata.get("required", True)
        ),
    }


def json_schema(cls: type, *, schema_id: str, title: str) -> dict[str, Any]:
    """JSON Schema (Draft 2020-12) of dataclass ``cls`` from its field declarations: types,
    ``enum`` (choices), bounds (:meth:`~ragen_envs.ranges.Range.schema`), ``description``
    (help) and ``default``; nested dataclasses become nested objects with no extra keys."""
    schema = _object_schema(cls)
    schema.update(
        {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": schema_id,
            "title": title,
            "description": section_help(cls),
        }
    )
    return schema


def section_help(cls: type) -> str:
    """The first line of a section dataclass's docstring."""
    return (cls.__doc__ or "").strip().splitlines()[0] if cls.__doc__ else ""
