"""The replay back-end: Lean answers recorded in a JSONL file, looked up instead of computed.

It lets the env run where no Lean is installed (tests, the generic env sweep, CI) and
replays a real session exactly.  The file holds JSON objects, one per line:

* optionally first, a header ``{"format": "ragen-lean-replay", "version": 0,
  "unrecorded": "error" | "reject", "note": "..."}``;
* answers ``{"theorem": <name> | "*", "tactics": [t1, ..., tk], "answer": A}``: ``A`` is
  the REPL's answer to ``tk`` applied after ``t1 .. tk-1`` (a proof-step response or an
  error ``{"message"}``, as :func:`~.protocol.tactic_check` reads it), or the string
  ``"timeout"``.  With ``tactics: []``, ``A`` is the statement command's answer (its one
  ``sorry`` gives the initial goal).  ``"*"`` matches any theorem (after the exact name).

A request with no recorded answer is a :class:`~.verifier.VerifierError` when
``unrecorded`` is ``"error"`` (the default), or a rejected tactic (an error message
"no recorded answer") when it is ``"reject"``.  The initial goal falls back to the
theorem's recorded ``goal`` field.  :meth:`ReplayVerifier.known_proof` returns the
shortest recorded sequence whose last answer completes the proof (for the theorem's
name, else for ``"*"``); the env's oracle plays it.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...data.loaders import DataSourceError, read_records
from .protocol import REJECTED, TIMEOUT, LeanMessage, ProtocolError, TacticCheck, tactic_check
from .theorems import Theorem, line_of_record
from .verifier import Verifier, VerifierError

__all__ = ["ReplayVerifier", "Recording", "load_recording"]


class Recording:
    """A parsed replay file (see the module docstring)."""

    def __init__(self, path: str, unrecorded: str, answers: dict[tuple[str, tuple[str, ...]], Any]):
        self.path = path
        self.unrecorded = unrecorded
        self.answers = answers

    def lookup(self, theorem: str, tactics: tuple[str, ...]) -> Any:
        """The recorded answer for the exact theorem name, else for ``"*"``, else ``None``."""
        hit = self.answers.get((theorem, tactics))
        return hit if hit is not None else self.answers.get(("*", tactics))


@functools.lru_cache(maxsize=8)
def load_recording(path: str) -> Recording:
    """Read a replay file (cached per path).

    Raises:
        VerifierError: the file is missing or a line is malformed (one line naming it).
    """
    p = Path(path)
    try:
        entries = read_records(p, format="jsonl")
    except DataSourceError as exc:
        raise VerifierError(f"replay file: {exc}") from None
    unrecorded = "error"
    answers: dict[tuple[str, tuple[str, ...]], Any] = {}

    def where(i: int) -> str:  # only on an error: it reads the file again for the line number
        return f"{path}:{line_of_record(p, i) or f'record {i + 1}'}"

    for i, entry in enumerate(entries):
        if "format" in entry:
            unrecorded = entry.get("unrecorded", "error")
            if unrecorded not in ("error", "reject"):
                raise VerifierError(
                    f"{where(i)}: 'unrecorded' must be 'error' or 'reject', got {unrecorded!r}"
                )
            continue
        theorem, tactics = entry.get("theorem"), entry.get("tactics")
        if (
            not isinstance(theorem, str)
            or not isinstance(tactics, list)
            or not all(isinstance(t, str) for t in tactics)
            or "answer" not in entry
        ):
            raise VerifierError(
                f"{where(i)}: an answer needs 'theorem' (string), 'tactics' (list of strings) "
                "and 'answer'"
            )
        answers[(theorem, tuple(tactics))] = entry["answer"]
    return Recording(str(p), unrecorded, answers)


class ReplayVerifier(Verifier):
    """Answers from a :class:`Recording` (module docstring)."""

    kind = "replay"

    def __init__(self, path: str):
        self.recording = load_recording(path)

    def open_goals(self, theorem: Theorem) -> tuple[str, ...]:
        answer = self.recording.lookup(theorem.name, ())
        if (
            isinstance(answer, dict)
            and isinstance(answer.get("sorries"), list)
            and answer["sorries"]
        ):
            return (str(answer["sorries"][0].get("goal", "")),)
        if theorem.goal is not None:
            return (theorem.goal,)
        raise VerifierError(
            f"replay {self.recording.path}: no recorded statement answer and no 'goal' "
            f"for theorem {theorem.name}"
        )

    def check(self, theorem: Theorem, proof: Sequence[str], tactic: str) -> TacticCheck:
        tactics = (*proof, tactic)
        answer = self.recording.lookup(theorem.name, tactics)
        if answer is None:
            if self.recording.unrecorded == "reject":
                return TacticCheck(
                    REJECTED,
                    reason="unrecorded",
                    messages=(LeanMessage("error", "no recorded answer (replay back-end)"),),
                )
            raise VerifierError(
                f"replay {self.recording.path}: no recorded answer for theorem {theorem.name} "
                f"after {list(tactics)!r:.200}"
            )
        if answer == "timeout":
            return TacticCheck(
                TIMEOUT,
                reason="Lean timed out (recorded)",
                messages=(LeanMessage("error", "timed out (recorded)"),),
            )
        try:
            return tactic_check(answer)
        except ProtocolError as exc:
            raise VerifierError(f"replay {self.recording.path}: {exc}") from None

    def known_proof(self, theorem: Theorem) -> tuple[str, ...] | None:
        for wanted in (theorem.name, "*"):
            best: tuple[str, ...] | None = None
            for (name, tactics), answer in self.recording.answers.items():
                if name != wanted or not tactics or not isinstance(answer, dict):
                    continue
                try:
                    done = tactic_check(answer).complete
                except ProtocolError:
                    continue
                if done and (best is None or (len(tactics), tactics) < (len(best), best)):
                    best = tactics
            if best is not None:
                return best
        return None
