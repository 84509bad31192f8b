"""In-process command-line runs whose output can be asserted verbatim.

:func:`in_process_cli` runs a typer app (``ragen_bench.cli`` or ``ragen_train.cli``)
through typer's ``CliRunner`` with the module's two rich consoles (``out`` for results,
``console`` for messages) replaced by 400-column in-memory buffers, so nothing wraps.
"""

from __future__ import annotations

import io
from collections.abc import Callable
from types import ModuleType

import pytest

Invoke = Callable[..., tuple[int, str, str]]


def in_process_cli(monkeypatch: pytest.MonkeyPatch, cli_mod: ModuleType) -> Invoke:
    """``invoke(*args) -> (exit code, stdout, stderr)`` for ``cli_mod.app``.

    An exception other than ``SystemExit`` escaping the command is re-raised, so a
    traceback fails the test instead of reading as a non-zero exit.
    """
    from rich.console import Console
    from typer.testing import CliRunner

    def invoke(*args: str) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        monkeypatch.setattr(cli_mod, "out", Console(file=out, width=400))
        monkeypatch.setattr(cli_mod, "console", Console(file=err, width=400))
        res = CliRunner().invoke(cli_mod.app, list(args))
        if res.exception is not None and not isinstance(res.exception, SystemExit):
            raise res.exception
        return res.exit_code, out.getvalue(), err.getvalue() + res.stderr

    return invoke
