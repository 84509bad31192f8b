"""Start a training launch in the background and check it later, so a test's one-process
reference runs while its ``torchrun`` launch does (a one-process run keeps one core busy, a
2-process launch two, and much of a launch is start-up: on 2 cores they overlap well).

    with start(cmd, env=env, cwd=cwd) as launch:
        ...  # other work
        launch.finish()  # asserts exit status 0, with the output's tail on failure

Leaving the ``with`` block early (the other work failed) kills the command's process group.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path


class Launch:
    """A started command whose combined output goes to a temporary file (no pipe to fill)."""

    def __init__(self, cmd: list[str], *, env: dict[str, str], cwd: Path | str):
        self.cmd = cmd
        self.log = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(
            cmd,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=cwd,
            start_new_session=True,  # its own process group: torchrun's workers go with it
        )

    def __enter__(self) -> Launch:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.kill()

    def kill(self) -> None:
        """SIGKILL the command's process group and reap it."""
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait()

    def finish(self, timeout: float = 800) -> str:
        """Wait for the command; returns its output.

        Raises:
            AssertionError: a non-zero exit status (the message holds the output, or its
                first 6,000 and last 3,000 characters: a faulthandler stack comes first,
                torchrun's summary last).
            subprocess.TimeoutExpired: still running after ``timeout`` seconds (it is killed).
        """
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            raise
        self.log.seek(0)
        out = self.log.read()
        self.log.close()
        shown = out if len(out) <= 9000 else out[:6000] + "\n[...]\n" + out[-3000:]
        assert rc == 0, f"{' '.join(self.cmd[:8])} ... exited {rc}:\n{shown}"
        return out


def start(cmd: list[str], *, env: dict[str, str], cwd: Path | str) -> Launch:
    """:class:`Launch` ``cmd`` now."""
    return Launch(cmd, env=env, cwd=cwd)
