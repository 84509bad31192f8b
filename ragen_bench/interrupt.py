"""Ctrl-C (SIGINT) and SIGTERM stop ``ragen-bench run`` and ``ragen-train`` the same way.

Python turns SIGINT into :class:`KeyboardInterrupt`, which unwinds through every
``finally`` (the results file is closed, ``run.json`` records the session, the writer
lock is released) and lets the command line print one line: what was saved and the
command that resumes.  SIGTERM (``kill``, a job scheduler, a container stop) killed the
process at once and printed nothing.  :func:`sigterm_as_interrupt` makes SIGTERM raise
:class:`Stopped`, a ``KeyboardInterrupt``, so both signals take the same path; the
commands exit with status 128 + the signal number (130 for SIGINT, 143 for SIGTERM), as
a shell reports a process ended by that signal.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from pathlib import Path


class Stopped(KeyboardInterrupt):
    """Raised by the SIGTERM handler of :func:`sigterm_as_interrupt` (``signum``: the signal)."""

    def __init__(self, signum: int = signal.SIGTERM):
        super().__init__(signum)
        self.signum = int(signum)


class RunInterrupted(KeyboardInterrupt):
    """A ``ragen-bench`` run stopped by a signal after its run directory was created.

    Attributes:
        path: the run directory (its recorded episodes stay; ``--resume`` finishes it).
        signum: the signal (``SIGINT`` for Ctrl-C).
    """

    def __init__(self, path: str | Path, signum: int):
        super().__init__(str(path))
        self.path = Path(path)
        self.signum = int(signum)


def signal_of(exc: BaseException) -> int:
    """The signal behind a ``KeyboardInterrupt``: ``SIGTERM`` for :class:`Stopped`, else ``SIGINT``."""
    return int(getattr(exc, "signum", signal.SIGINT))


def signal_label(signum: int) -> str:
    """``"interrupted"`` (Ctrl-C) or ``"stopped by SIGTERM"``: the start of the one-line message."""
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


def exit_status(signum: int) -> int:
    """128 + the signal number, as a shell reports a process killed by it (130, 143)."""
    return 128 + int(signum)


@contextlib.contextmanager
def sigterm_as_interrupt() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Stopped` in the main thread (then the previous
    handler is restored).  Does nothing outside the main thread, where Python cannot
    install a handler."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: object) -> None:
        raise Stopped(signum)

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


__all__ = [
    "RunInterrupted",
    "Stopped",
    "exit_status",
    "signal_label",
    "signal_of",
    "sigterm_as_interrupt",
]
