"""Declared command-line options: a table of :class:`CliOption` s becomes a typer command.

``ragen-bench run`` has some fifty options; the runner (:mod:`ragen_bench.runner`), the
policy back-ends (:data:`ragen_bench.policies.POLICIES`) and the diagnostics step each
declare theirs where their meaning lives, and :func:`with_options` turns the tables into
the command's signature (typer reads ``inspect.signature``).  The command body then gets
every value by name and hands them to whoever declared them.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any


@dataclass(frozen=True)
class CliOption:
    """One command-line option.

    Attributes:
        name: the Python parameter name; the option is ``--name-with-dashes`` unless
            ``flags`` says otherwise.
        type: its type as typer reads it (``int``, ``Optional[float]``, ``Optional[list[str]]``...).
        default: the value when the option is not given (``None``: the owner's default).
        help: the ``--help`` text.
        key: where the value goes for the option's owner (a factory keyword, a
            ``rollout.sampling.temperature`` path...); default ``name``.
        flags: explicit declarations, e.g. ``("--env", "-e")`` or ``("--stream/--no-stream",)``.
        panel: the ``--help`` section it is listed under (``None``: the main one).
        hidden: left out of ``--help`` (a deprecated spelling kept for one release).
    """

    name: str
    type: Any
    default: Any
    help: str
    key: str | None = None
    flags: tuple[str, ...] = ()
    panel: str | None = None
    hidden: bool = False

    @property
    def keyword(self) -> str:
        """Where the value goes (``key``, else ``name``)."""
        return self.key or self.name

    def parameter(self, panel: str | None = None) -> inspect.Parameter:
        """The keyword-only parameter typer turns into this option."""
        import typer  # only a command line needs it

        info = typer.Option(
            *self.flags, help=self.help, rich_help_panel=self.panel or panel, hidden=self.hidden
        )
        return inspect.Parameter(
            self.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=self.default,
            annotation=Annotated[self.type, info],
        )


def unique(options: Iterable[CliOption]) -> list[CliOption]:
    """``options`` with each name once (the first declaration wins), in order."""
    seen: dict[str, CliOption] = {}
    for opt in options:
        seen.setdefault(opt.name, opt)
    return list(seen.values())


def with_options(
    *groups: tuple[str | None, Iterable[CliOption]],
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator giving ``fn(ctx, **values)`` one keyword parameter per declared option.

    Args:
        groups: ``(help panel, options)`` pairs in ``--help`` order; a name declared twice
            is taken once (the first declaration).

    Raises:
        ValueError: a declared name clashes with one of ``fn``'s own parameters.
    """

    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        own = [
            p
            for p in inspect.signature(fn).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        taken = {p.name for p in own}
        params = list(own)
        seen: set[str] = set()
        for panel, options in groups:
            for opt in options:
                if opt.name in seen:
                    continue
                if opt.name in taken:
                    raise ValueError(
                        f"option {opt.name!r} clashes with a parameter of {fn.__name__}"
                    )
                seen.add(opt.name)
                params.append(opt.parameter(panel))
        fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
        fn.__annotations__ = {
            p.name: p.annotation for p in params if p.annotation is not inspect.Parameter.empty
        }
        return fn

    return deco


__all__ = ["CliOption", "unique", "with_options"]
