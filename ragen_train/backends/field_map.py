"""Back-end settings generated from a field table: each entry names the back-end keys it sets.

An external back-end declares what it does with every config field in one table
(``TRL_FIELDS``, ``VERL_FIELDS``).  An entry made with :func:`sets` also says which of the
back-end's settings the field becomes and how its value is read; :func:`settings_from_table`
walks the table and produces the settings dict, so a new field is one table entry.  Values
that are computed rather than copied (a batch shape, a loss normaliser, "0 means off") are
small named functions the entries call.

The producers take a *plan*: an object with the config as ``plan.cfg`` and the values the
back-end derives once for several keys (its batch shape, its schedule), e.g.
:class:`ragen_train.backends.trl_backend.TRLPlan`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .common import FieldHandling

#: A producer's return value meaning "leave this key unset" (the back-end's default applies).
UNSET: Any = type("Unset", (), {"__repr__": lambda self: "UNSET"})()

Producer = Callable[[Any], Any]


@dataclass(frozen=True)
class SettingField(FieldHandling):
    """A :class:`~ragen_train.backends.common.FieldHandling` that also sets back-end keys.

    Attributes:
        produces: ``(back-end key, producer)`` pairs, in order; a producer takes the
            back-end's plan and returns the key's value, or :data:`UNSET`; ``None``: the
            field's own value, copied (``plan.cfg`` at the entry's dotted path).
    """

    produces: tuple[tuple[str, Producer | None], ...] = ()


def sets(
    status: str, detail: str, produces: str | Mapping[str, Producer | None], *refused: str
) -> SettingField:
    """A table entry that sets back-end keys: ``produces`` maps each key to its producer
    (``None``: copy the field's value); a plain key ``"learning_rate"`` is
    ``{"learning_rate": None}``.

    ``status``, ``detail`` and ``refused`` as for
    :func:`~ragen_train.backends.common.handling`.
    """
    pairs = {produces: None} if isinstance(produces, str) else produces
    return SettingField(status, detail, tuple(refused), tuple(pairs.items()))


def field_value(cfg: Any, path: str) -> Any:
    """The value of the config field ``path`` (``"optim.lr"`` -> ``cfg.optim.lr``)."""
    node = cfg
    for name in path.split("."):
        node = getattr(node, name)
    return node


def declared_keys(table: Mapping[str, FieldHandling]) -> dict[str, str]:
    """``back-end key -> config field`` for every key an entry of ``table`` sets.

    Raises:
        ValueError: two entries set the same key.
    """
    out: dict[str, str] = {}
    for path, how in table.items():
        for key, _ in getattr(how, "produces", ()):
            if key in out:
                raise ValueError(f"{key!r} is set by both {out[key]!r} and {path!r}")
            out[key] = path
    return out


def settings_from_table(
    table: Mapping[str, FieldHandling], plan: Any, fixed: Iterable[tuple[str, Any]] = ()
) -> dict[str, Any]:
    """The back-end settings of ``plan`` (which holds the config as ``plan.cfg``): every key
    an entry of ``table`` sets (in table order; keys whose producer returns :data:`UNSET`
    are left out), then ``fixed``.

    Raises:
        ValueError: a key is set twice (by two entries, or by an entry and ``fixed``).
    """
    out: dict[str, Any] = {}
    declared_keys(table)  # a key set by two entries is a table error, whatever the config
    for path, how in table.items():
        for key, produce in getattr(how, "produces", ()):
            value = field_value(plan.cfg, path) if produce is None else produce(plan)
            if value is not UNSET:
                out[key] = value
    for key, value in fixed:
        if key in out:
            raise ValueError(f"{key!r} is fixed and also set by a table entry")
        out[key] = value
    return out


def positive_or(value: float, off: Any) -> Any:
    """``value`` when it is above 0, else ``off`` (our "0 switches it off" as the back-end's
    own off value: ``positive_or(0, -1) == -1``, ``positive_or(5, -1) == 5``)."""
    return value if value > 0 else off


def none_or(value: Any, off: Any) -> Any:
    """``value`` unless it is ``None``, else ``off`` (``none_or(None, 1e9) == 1e9``)."""
    return off if value is None else value


def loss_normaliser(norm_len: float | None, max_new_tokens: int, max_turns: int) -> float:
    """The constant length a ``*-norm`` loss aggregation divides by, as the native trainer:
    ``norm_len`` when set, else ``max_new_tokens · max(1, max_turns)`` (tokens)."""
    return float(norm_len or max_new_tokens * max(1, max_turns))


__all__ = [
    "UNSET",
    "SettingField",
    "declared_keys",
    "field_value",
    "loss_normaliser",
    "none_or",
    "positive_or",
    "sets",
    "settings_from_table",
]
