"""In-process command-line runs whose output can be asserted verbatim.

:func:`in_process_cli` runs a typer app (``ragen_bench.cli`` or ``ragen_train.cli``)
through typer's ``CliRunner`` with the module's two rich consoles (``out`` for results,
``console`` for messages) replaced by 400-column in-memory buffers, so nothing wraps.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
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


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """``ragen-bench`` in-process, its consoles on wide buffers: ``(exit code, stdout, stderr)``."""
    import ragen_bench.cli as cli_mod

    return in_process_cli(monkeypatch, cli_mod)


@pytest.fixture
def train(monkeypatch: pytest.MonkeyPatch) -> Invoke:
    """``ragen-train`` in-process, as :func:`bench`."""
    import ragen_train.cli as cli_mod

    return in_process_cli(monkeypatch, cli_mod)


def one_line(err: str) -> str:
    """The one non-blank line of ``err``; fails the test when there are more or none."""
    lines = [x for x in err.splitlines() if x.strip()]
    assert len(lines) == 1, err
    return lines[0]


def subprocess_env(**extra: str) -> dict[str, str]:
    """The environment for a CLI subprocess: this checkout first on ``PYTHONPATH``, unbuffered,
    300 columns, plus ``extra``."""
    return {
        **os.environ,
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
        "PYTHONUNBUFFERED": "1",
        "COLUMNS": "300",
        **extra,
    }


def stop_when(proc: subprocess.Popen, ready, what: str, limit_s: float = 300) -> str:
    """Send SIGTERM to ``proc`` once ``ready()`` is true (polled every 0.5 s, at most ``limit_s``
    seconds) and return its stderr; the process is killed if it is still alive afterwards."""
    deadline = time.monotonic() + limit_s
    try:
        while not ready() and time.monotonic() < deadline:
            assert proc.poll() is None, proc.communicate()[1][-2000:]
            time.sleep(0.5)
        assert ready(), f"{what} never appeared"
        proc.send_signal(signal.SIGTERM)
        return proc.communicate(timeout=120)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
