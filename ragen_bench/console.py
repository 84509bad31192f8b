"""Consoles shared by the command-line tools (``ragen-bench``, ``ragen-train``).

Results go to stdout, warnings and errors to stderr; off a terminal rich would assume 80
columns and fold every log line, so those consoles are made at least 160 columns wide.
Messages are printed literally: user and data text such as ``search[query]`` or
``[/red]`` is escaped, never read as rich markup.
"""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape

from .controls import visible
from .redaction import redact


def make_console(*, stderr: bool = False, min_width: int = 160) -> Console:
    """A rich console; ``max(detected width, min_width)`` wide when its stream is not a terminal."""
    console = Console(stderr=stderr)
    if not console.is_terminal:
        console = Console(stderr=stderr, width=max(console.width, min_width))
    return console


def print_error(console: Console, message: object, label: str = "error:") -> None:
    """``label message`` as one line (``message`` escaped: no rich markup, no terminal
    control sequences or line breaks from the text, :func:`~ragen_bench.controls.visible`),
    in red."""
    console.print(f"[red]{label}[/red] {escape(visible(redact(str(message))))}", soft_wrap=True)
