"""The Lean REPL back-end (leanprover-community/repl, ``lake exe repl``) as a subprocess.

Protocol facts (the REPL's ``README.md`` and ``REPL/Main.lean``): one JSON command per
query, queries separated by a blank line on stdin; each answer is JSON (possibly over
several lines) followed by a blank line on stdout; end of input ends the REPL.

Per theorem the back-end sends the header once per process (``{"cmd": header}`` ->
``env``; skipped for an empty header), then the statement with ``sorry`` as its proof
(``{"cmd": "<statement> sorry", "env": e}``), whose single ``sorries`` entry gives
the root ``proofState`` and goal; then each tactic is one
``{"tactic": t, "proofState": n}``, so a step costs one tactic, not a re-check.

Limits: ``repl_memory_mb`` caps the address space of the REPL and its children;
``start_timeout_s`` bounds the header and statement commands, ``lean_timeout_s`` a
tactic.  A tactic past its limit is Lean's ``timeout`` verdict:
the REPL (busy, unusable) is killed, and the next call restarts it and replays the
accepted tactics.  A REPL that exits, answers garbage or stays silent on a command is
restarted up to ``max_retries`` times; then a one-line
:class:`~.verifier.VerifierError` names the command, exit status and stderr tail.
"""

from __future__ import annotations

import collections
import functools
import json
import os
import queue
import signal
import subprocess
import threading
import time
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from .protocol import (
    ACCEPTED,
    TIMEOUT,
    LeanMessage,
    ProtocolError,
    TacticCheck,
    axioms_verdict,
    messages_of,
    tactic_check,
)
from .theorems import Theorem
from .verifier import Verifier, VerifierError, axioms_query

__all__ = ["ReplProcess", "ReplVerifier"]


class _Silent(Exception):
    """No answer within the time limit."""


class _Dead(Exception):
    """The process ended or answered something unreadable."""


class _Permanent(VerifierError):
    """A failure a restart cannot cure (no executable, a statement that does not elaborate)."""


def _drain(stream: Any, sink: Any) -> None:
    for line in iter(stream.readline, ""):
        sink(line)
    sink(None)


class ReplProcess:
    """One running REPL: send a JSON command, read the JSON answer, with a deadline.

    Raises (from :meth:`ask`): ``_Silent`` after ``timeout`` seconds without a complete
    answer, ``_Dead`` when the process has exited or its answer is not JSON.
    """

    def __init__(self, command: Sequence[str], cwd: str | None, memory_mb: int | None = None):
        self.command = list(command)
        limit = (
            None if memory_mb is None else functools.partial(_limit_memory, int(memory_mb) << 20)
        )
        try:
            self.proc = subprocess.Popen(
                self.command,
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                encoding="utf-8",
                errors="replace",
                bufsize=1,
                start_new_session=True,
                preexec_fn=limit,
            )
        except FileNotFoundError:
            raise _Permanent(
                f"Lean REPL executable not found: {self.command[0]!r} (command {' '.join(self.command)!r}"
                f"{f', in {cwd}' if cwd else ''}); install Lean and the REPL or set the verifier "
                "to 'repl:<command>'"
            ) from None
        except OSError as exc:
            raise VerifierError(
                f"cannot start the Lean REPL {' '.join(self.command)!r}: {exc}"
            ) from None
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._stderr: collections.deque[str] = collections.deque(maxlen=20)
        threading.Thread(
            target=_drain, args=(self.proc.stdout, self._lines.put), daemon=True
        ).start()

        def keep_stderr(line: str | None) -> None:
            if line:
                self._stderr.append(line)

        threading.Thread(target=_drain, args=(self.proc.stderr, keep_stderr), daemon=True).start()
        self._finalizer = weakref.finalize(self, _kill, self.proc)

    def stderr_tail(self) -> str:
        """The last stderr lines, joined on one line."""
        return " | ".join(s.strip() for s in self._stderr if s.strip())[-300:]

    def describe_exit(self) -> str:
        """How the process ended, for error messages."""
        code = self.proc.poll()
        what = "is still running" if code is None else f"exited with status {code}"
        tail = self.stderr_tail()
        return f"{what}{f'; stderr: {tail}' if tail else ''}"

    def ask(self, command: Mapping[str, Any], timeout: float) -> Any:
        """Send one command and return the parsed answer (see the class docstring)."""
        stdin = self.proc.stdin
        assert stdin is not None  # the process is started with stdin=PIPE
        try:
            stdin.write(json.dumps(command, ensure_ascii=False) + "\n\n")
            stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise _Dead() from None
        deadline = time.monotonic() + timeout
        lines: list[str] = []
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise _Silent()
            try:
                line = self._lines.get(timeout=left)
            except queue.Empty:
                raise _Silent() from None
            if line is None:
                raise _Dead()
            if line.strip():
                lines.append(line)
            elif lines:
                break
        try:
            return json.loads("".join(lines))
        except ValueError:
            raise _Dead() from None

    def close(self) -> None:
        """Close stdin (the REPL's signal to stop) and kill what is left."""
        self._finalizer()


def _limit_memory(nbytes: int) -> None:
    """In the child before exec: cap its address space (inherited by its children)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (nbytes, nbytes))


def _kill(proc: subprocess.Popen[str]) -> None:
    """Close stdin (a REPL at rest exits), then kill the whole process group: ``lake exe
    repl`` runs the ``repl`` binary as a child, which must not outlive it."""
    try:
        if proc.stdin:
            proc.stdin.close()
    except OSError:
        pass
    try:
        proc.wait(timeout=0.5)
    except subprocess.TimeoutExpired:
        pass
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # its own group: started with start_new_session=True
    except (ProcessLookupError, PermissionError, AttributeError, OSError):
        if proc.poll() is None:
            proc.kill()
    try:
        proc.wait(timeout=5)
    except subprocess.TimeoutExpired:
        pass


class ReplVerifier(Verifier):
    """Checks tactics in a Lean REPL subprocess (see the module docstring).

    Config fields used: ``repl_cwd`` (the Lean project the REPL runs in; ``null``: the
    current directory), ``repl_memory_mb`` (``RLIMIT_AS`` of the process and its
    children; ``null``: none), ``lean_timeout_s``, ``start_timeout_s``, ``max_retries``.
    """

    kind = "repl"

    def __init__(self, command: Sequence[str], config: Mapping[str, Any]):
        self.command = tuple(command)
        self.cwd = config.get("repl_cwd")
        self.memory_mb = config.get("repl_memory_mb")
        self.tactic_timeout = float(config["lean_timeout_s"])
        self.start_timeout = float(config["start_timeout_s"])
        self.retries = int(config["max_retries"])
        self._proc: ReplProcess | None = None
        self._header_env: dict[str, int] = {}
        #: proofState of (theorem name, accepted tactics) in the current process.
        self._states: dict[tuple[str, tuple[str, ...]], int] = {}
        self._goals: dict[str, tuple[str, ...]] = {}
        self._attempts = 1

    def _label(self) -> str:
        return f"Lean REPL {' '.join(self.command)!r}"

    # ------------------------------------------------------------ process
    def _process(self) -> ReplProcess:
        if self._proc is None or self._proc.proc.poll() is not None:
            self._restart()
        assert self._proc is not None
        return self._proc

    def _restart(self) -> None:
        self._restart_lazily()
        self._proc = ReplProcess(self.command, self.cwd, self.memory_mb)

    def _ask(self, command: Mapping[str, Any], timeout: float, what: str) -> Any:
        """One command; a silent or dead REPL is a VerifierError (no retry here)."""
        proc = self._process()
        try:
            return proc.ask(command, timeout)
        except _Silent:
            proc.close()
            raise VerifierError(
                f"{self._label()} gave no answer to the {what} within {timeout:g} s"
            ) from None
        except _Dead:
            raise VerifierError(
                f"{self._label()} failed on the {what}: it {_ended(proc)}"
            ) from None

    def _retrying(self, fn: Any) -> Any:
        last: VerifierError | None = None
        for attempt in range(1 + self.retries):
            self._attempts = attempt + 1
            try:
                return fn()
            except _Permanent:
                raise
            except VerifierError as exc:
                last = exc
                self._restart_lazily()
        assert last is not None
        raise VerifierError(f"{last} (after {1 + self.retries} tries)")

    def _restart_lazily(self) -> None:
        if self._proc is not None:
            self._proc.close()
            self._proc = None
        self._header_env.clear()
        self._states.clear()

    # ------------------------------------------------------------ commands
    def _env_for(self, header: str) -> int | None:
        if not header.strip():
            return None
        if header not in self._header_env:
            answer = self._ask({"cmd": header}, self.start_timeout, "header command")
            errors = [m for m in _messages(answer, self._label()) if m.severity == "error"]
            if not isinstance(answer, Mapping) or not isinstance(answer.get("env"), int) or errors:
                raise _Permanent(
                    f"{self._label()}: the header does not elaborate: "
                    f"{(errors[0].text if errors else repr(answer))[:200]}"
                )
            self._header_env[header] = answer["env"]
        return self._header_env[header]

    def _root(self, theorem: Theorem) -> int:
        key = (theorem.name, ())
        if key in self._states:
            return self._states[key]
        env = self._env_for(theorem.header)
        cmd: dict[str, Any] = {"cmd": theorem.statement.rstrip() + " sorry"}
        if env is not None:
            cmd["env"] = env
        answer = self._ask(cmd, self.start_timeout, "statement command")
        errors = [m for m in _messages(answer, self._label()) if m.severity == "error"]
        sorries = answer.get("sorries") if isinstance(answer, Mapping) else None
        if (
            errors
            or not isinstance(sorries, list)
            or len(sorries) != 1
            or "proofState" not in sorries[0]
        ):
            detail = (
                errors[0].text
                if errors
                else f"expected one sorry with a proofState, got {answer!r:.150}"
            )
            raise _Permanent(
                f"{self._label()}: the statement of {theorem.name} does not elaborate: {detail[:200]}"
            )
        self._states = {k: v for k, v in self._states.items() if k[0] == theorem.name}
        self._states[key] = int(sorries[0]["proofState"])
        self._goals[theorem.name] = (str(sorries[0].get("goal", "")),)
        return self._states[key]

    def _tactic(self, state: int, tactic: str, timeout: float) -> Any:
        proc = self._process()
        try:
            return proc.ask({"tactic": tactic, "proofState": state}, timeout)
        except _Dead:
            raise VerifierError(
                f"{self._label()} failed on tactic {tactic[:60]!r}: it {_ended(proc)}"
            ) from None

    def _state_for(self, theorem: Theorem, proof: tuple[str, ...]) -> int:
        """proofState after ``proof`` in this process, replaying it after a restart."""
        key = (theorem.name, proof)
        if key in self._states:
            return self._states[key]
        state = self._root(theorem)
        for i, tactic in enumerate(proof):
            known = self._states.get((theorem.name, proof[: i + 1]))
            if known is not None:
                state = known
                continue
            try:
                answer = self._tactic(state, tactic, self.start_timeout)
            except _Silent:
                self._restart_lazily()
                raise VerifierError(
                    f"{self._label()} gave no answer replaying accepted tactic {tactic[:60]!r}"
                ) from None
            check = _classify(answer, self._label())
            if check.outcome != ACCEPTED:
                raise VerifierError(
                    f"{self._label()}: replaying accepted tactic {tactic[:60]!r} after a restart "
                    f"was {check.outcome} ({check.reason})"
                )
            state = int(answer["proofState"])
            self._states[(theorem.name, proof[: i + 1])] = state
        return state

    # ----------------------------------------------------------- interface
    def open_goals(self, theorem: Theorem) -> tuple[str, ...]:
        self._retrying(lambda: self._root(theorem))
        return self._goals[theorem.name]

    def check(self, theorem: Theorem, proof: Sequence[str], tactic: str) -> TacticCheck:
        proof = tuple(proof)

        def once() -> TacticCheck | Any:
            state = self._state_for(theorem, proof)
            try:
                return self._tactic(state, tactic, self.tactic_timeout)
            except _Silent:
                self._restart_lazily()  # busy on the tactic: unusable; the next call replays
                return None

        answer = self._retrying(once)
        if answer is None:
            return TacticCheck(
                TIMEOUT,
                reason=f"Lean timed out after {self.tactic_timeout:g} s",
                messages=(LeanMessage("error", f"no answer within {self.tactic_timeout:g} s"),),
            )
        check = _classify(answer, self._label())
        if check.outcome == ACCEPTED and not check.complete:
            self._states[(theorem.name, (*proof, tactic))] = int(answer["proofState"])
        if check.complete:
            return self._axioms(theorem, (*proof, tactic), check)
        return check

    def _axioms(
        self, theorem: Theorem, tactics: tuple[str, ...], check: TacticCheck
    ) -> TacticCheck:
        """``check`` of a finished proof, or its rejection when ``#print axioms`` lists an
        axiom besides Lean's standard three (module docstring of :mod:`.verifier`)."""
        query = axioms_query(theorem, tactics, header=False)
        if query is None:
            return check
        text, name, line = query

        def once() -> Any:
            cmd: dict[str, Any] = {"cmd": text}
            env = self._env_for(theorem.header)
            if env is not None:
                cmd["env"] = env
            return self._ask(cmd, self.tactic_timeout, "#print axioms command")

        answer = self._retrying(once)
        try:
            return axioms_verdict(answer, name=name, line=line) or check
        except ProtocolError as exc:
            raise VerifierError(f"{self._label()}: {exc}") from None

    def close(self) -> None:
        if self._proc is not None:
            self._proc.close()
            self._proc = None


def _messages(answer: Any, label: str) -> tuple[LeanMessage, ...]:
    if not isinstance(answer, Mapping):
        raise VerifierError(f"{label} answered {answer!r:.150}, not a JSON object")
    try:
        return messages_of(answer)
    except ProtocolError as exc:
        raise VerifierError(f"{label}: {exc}") from None


def _classify(answer: Any, label: str) -> TacticCheck:
    try:
        return tactic_check(answer)
    except ProtocolError as exc:
        raise VerifierError(f"{label}: {exc}") from None


def _ended(proc: ReplProcess) -> str:
    """Wait briefly for a dying process, describe how it ended, and close it."""
    if proc.proc.poll() is None:
        try:
            proc.proc.wait(timeout=2)
        except subprocess.TimeoutExpired:
            pass
    detail = proc.describe_exit()
    proc.close()
    return detail
