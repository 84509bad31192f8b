"""The one look of the ``ragen-bench`` and ``ragen-train`` command lines.

Both CLIs are typer apps made by :func:`make_app`, so ``--help`` pages and usage errors look
the same in both: click's plain help (``Usage:``, ``Options:``, ``Commands:`` sections),
not rich's boxed panels.  Plain because it wraps the help text and never cuts an option
name (rich's option table ellipsised ``--max-actions-per-turn`` at 80 columns), and because
its pages read the same in a pipe, a log or a terminal.
"""

from __future__ import annotations

from typing import Any

import typer

#: typer's ``rich_markup_mode`` of every ragen app (``None``: click's plain help and errors).
MARKUP_MODE = None


def make_app(help: str, **options: Any) -> typer.Typer:  # noqa: A002 - typer's own name
    """A typer app in the house style: plain help, no shell-completion options, help when
    run without arguments.

    Args:
        help: the app's one-line description (the top of ``--help``).
        options: more :class:`typer.Typer` arguments (``cls`` for a custom group class).
    """
    settings: dict[str, Any] = {
        "add_completion": False,
        "no_args_is_help": True,
        "rich_markup_mode": MARKUP_MODE,
    }
    return typer.Typer(help=help, **{**settings, **options})


__all__ = ["MARKUP_MODE", "make_app"]
