"""One small registry mechanism for every named, pluggable part of ragen.

Advantage estimators, policy losses, loss aggregation modes and KL estimators
(:mod:`ragen_train`) and policy back-ends (:mod:`ragen_bench.policies`) are each a
:class:`Registry`: the decorator that defines a part is the only place its name is
written.  Config validation, command-line choices, the TRL/verl mappings and listings
read the names (and each part's metadata) from the registry.

The pattern follows verl's ``register_adv_est`` / ``register_policy_loss`` decorators
(verl-project/verl, ``verl/trainer/ppo/core_algos.py``): a name maps to a function and
a lookup of an unknown name fails naming the known ones.  Our registries add per-entry
metadata (e.g. whether an estimator needs a critic) so that callers branch on
properties, never on names.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class UnknownNameError(KeyError, ValueError):
    """A name that is not registered.  Both a ``KeyError`` (a failed lookup) and a
    ``ValueError`` (a bad setting), so callers written for either keep working.

    Attributes:
        kind: what was looked up (``"advantage estimator"``).
        name: the name asked for.
        known: the registered names.
    """

    def __init__(self, kind: str, name: str, known: tuple[str, ...]):
        self.kind, self.name, self.known = kind, name, known
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        hint = f" (did you mean {close[0]!r}?)" if close else ""
        super().__init__(f"unknown {kind} {name!r}{hint}; known: {', '.join(known)}")

    def __str__(self) -> str:  # KeyError would quote the whole message
        return str(self.args[0])


@dataclass(frozen=True)
class Entry(Generic[T]):
    """One registered part: its name, the object and the metadata it was registered with."""

    name: str
    obj: T
    meta: dict[str, Any] = field(default_factory=dict)


class Registry(Generic[T]):
    """Names to objects, in registration order, with per-entry metadata.

    Args:
        kind: what the registry holds, for messages (``"KL estimator"``).

    Example::

        SHAPES = Registry("shape")

        @SHAPES.register("square", corners=4)
        def square(side): return side * side
    """

    def __init__(self, kind: str):
        self.kind = kind
        self._entries: dict[str, Entry[T]] = {}

    def register(self, name: str, **meta: Any) -> Callable[[T], T]:
        """Decorator registering ``obj`` under ``name`` with ``meta``; returns ``obj`` unchanged.

        Raises:
            ValueError: ``name`` is already registered (two parts cannot share a name).
        """

        def deco(obj: T) -> T:
            self.add(name, obj, **meta)
            return obj

        return deco

    def add(self, name: str, obj: T, **meta: Any) -> None:
        """Register ``obj`` under ``name`` (the non-decorator form of :meth:`register`).

        Raises:
            ValueError: ``name`` is already registered.
        """
        if name in self._entries:
            raise ValueError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = Entry(name, obj, dict(meta))

    def remove(self, name: str) -> Entry[T]:
        """Unregister ``name`` and return its entry (tests and plug-ins that replace a part).

        Raises:
            UnknownNameError: not registered.
        """
        entry = self.entry(name)
        del self._entries[name]
        return entry

    def entry(self, name: str) -> Entry[T]:
        """The entry of ``name``.

        Raises:
            UnknownNameError: not registered (the message lists the known names).
        """
        try:
            return self._entries[name]
        except (KeyError, TypeError):
            raise UnknownNameError(self.kind, name, self.names()) from None

    def get(self, name: str) -> T:
        """The object registered under ``name`` (raises :class:`UnknownNameError`)."""
        return self.entry(name).obj

    def meta(self, name: str, key: str, default: Any = None) -> Any:
        """Metadata ``key`` of ``name`` (``default`` when the entry has none)."""
        return self.entry(name).meta.get(key, default)

    def names(self, **where: Any) -> tuple[str, ...]:
        """Registered names in registration order; with ``where``, only those whose
        metadata has every given value (``names(needs_critic=True)``)."""
        return tuple(
            n for n, e in self._entries.items() if all(e.meta.get(k) == v for k, v in where.items())
        )

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def __getitem__(self, name: str) -> T:
        return self.get(name)

    def __repr__(self) -> str:
        return f"Registry({self.kind!r}: {', '.join(self._entries)})"


__all__ = ["Entry", "Registry", "UnknownNameError"]
