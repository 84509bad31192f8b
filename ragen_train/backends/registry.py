"""Trainer back-ends by name (``ragen-train starpo --trainer NAME``).

Each factory imports its back-end only when called (TRL and verl are optional), and lives
here rather than in :mod:`.base`, which the back-ends import: the interface knows no
implementation, so the modules import in one direction (tests/test_import_graph.py).
"""

from __future__ import annotations

from collections.abc import Callable

from ragen_bench.registry import Registry

from .base import TrainerBackend

#: Trainer back-end factories by the name ``ragen-train starpo --trainer`` takes (each
#: imports its library lazily: TRL and verl are optional).  Metadata: ``resume`` — the
#: back-end continues a run (``ragen-train starpo --resume``).
TRAINER_BACKENDS: Registry[Callable[[], TrainerBackend]] = Registry("trainer back-end")


@TRAINER_BACKENDS.register("native", resume=True)
def _native() -> TrainerBackend:
    from .native import NativeBackend

    return NativeBackend()


@TRAINER_BACKENDS.register("trl", resume=True)
def _trl() -> TrainerBackend:
    from .trl_backend import TRLBackend

    return TRLBackend()


@TRAINER_BACKENDS.register("verl")
def _verl() -> TrainerBackend:
    from .verl_backend import VerlBackend

    return VerlBackend()


def get_backend(name: str) -> TrainerBackend:
    """The back-end called ``name``.

    Raises:
        KeyError: unknown name (:class:`~ragen_bench.registry.UnknownNameError`).
    """
    return TRAINER_BACKENDS.get(name)()
