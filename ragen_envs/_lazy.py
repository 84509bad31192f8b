"""Lazy package exports (PEP 562), so that ``import ragen_envs`` stays cheap.

``import ragen_envs`` imports every env package's ``register`` module (the
``register_env`` calls, :mod:`ragen_envs._register`), and so every env package's
``__init__``.  Those ``__init__`` modules export their names through :func:`lazy_exports`:
an env's modules (its solver, generator, sandboxed judge, ...) load the first time one of
its names is used — by ``ragen_envs.make`` through the entry point, or by
``from ragen_envs.envs.sokoban import solve`` — as Gymnasium's string entry points do.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, exports: Mapping[str, Sequence[str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]], list[str]]:
    """Module ``__getattr__``, ``__dir__`` and ``__all__`` for ``package``.

    Args:
        package: the package's ``__name__``.
        exports: relative submodule (``".env"``) -> the names it exports, as the
            ``from .env import A, B`` lines they replace.

    Returns:
        ``(__getattr__, __dir__, __all__)``: assign them in the package's ``__init__``.
        ``__getattr__`` imports the submodule on first use and caches the value in the
        package namespace; an unknown name raises :class:`AttributeError`.

    Raises:
        ValueError: a name is exported by two submodules.
    """
    where: dict[str, str] = {}
    for module, names in exports.items():
        for name in names:
            if name in where:
                raise ValueError(f"{package}: {name!r} exported by both {where[name]} and {module}")
            where[name] = module

    def __getattr__(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(sys.modules[package])) | set(where))

    return __getattr__, __dir__, sorted(where)
