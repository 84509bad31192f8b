"""What Lean's JSON answers mean for one tactic (spec: ``docs/envs/lean.md``, "Deciding").

Both back-ends end here.  The Lean REPL (leanprover-community/repl, ``REPL/JSON.lean``)
answers a tactic (``{"tactic": t, "proofState": n}``) with a proof-step response
``{"proofState", "goals", "messages"?, "sorries"?, "proofStatus"?}`` or an error
``{"message"}``; it answers a command (``{"cmd": ...}``) with
``{"env", "messages"?, "sorries"?}``, which is also what the Kimina Lean Server returns
in ``results[i].response``.  A message is ``{"severity", "pos", "endPos"?, "data"}``.

Only structured fields decide: ``severity == "error"``, a non-empty ``sorries``,
the ``goals`` list, the status word before the first ``:`` of ``proofStatus``
(``Completed`` / ``Incomplete`` / ``Error``), and for whole-proof checks the line of each
``sorry``.  Message text, which changes between Lean versions ("declaration uses
'sorry'" with or without backticks, "Goals accomplished!"), is shown to the agent and
not read — with one exception, a second line of defence: a proof that would be
*complete* is rejected when any warning says the declaration uses ``sorry`` (either
quoting), wherever it is (:func:`declares_sorry`).  A tactic can close a goal with
``sorryAx`` without a ``sorry`` in its text or in ``sorries`` — ``run_tac do
Lean.Elab.admitGoal (← Lean.Elab.Tactic.getMainGoal)`` — and then the declaration's
warning is the only trace.  A finished proof is also checked with
``#print axioms`` by the live back-ends (:func:`axioms_verdict`): only
:data:`ALLOWED_AXIOMS` may appear, read from the one answer to the env's own command
about the theorem's own name (never from any message shaped like one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = [
    "ACCEPTED",
    "ALLOWED_AXIOMS",
    "REJECTED",
    "TIMEOUT",
    "LeanMessage",
    "ProtocolError",
    "TacticCheck",
    "axioms_of",
    "axioms_verdict",
    "command_check",
    "declares_sorry",
    "goal_signature",
    "mentions_sorry",
    "messages_of",
    "state_signature",
    "tactic_check",
]

Outcome = Literal["accepted", "rejected", "timeout"]
ACCEPTED: Outcome = "accepted"
REJECTED: Outcome = "rejected"
TIMEOUT: Outcome = "timeout"

#: ``sorry``, ``admit`` and ``sorryAx`` as whole identifiers (Lean identifiers may contain
#: letters, digits, ``_``, ``'``, ``!``, ``?``, ``.`` and subscripts).
_SORRY = re.compile(r"(?<![\w'.!?])(sorry|admit|sorryAx)(?![\w'!?])")


class ProtocolError(ValueError):
    """An answer that is not in the shape the Lean protocols define."""


@dataclass(frozen=True)
class LeanMessage:
    """One Lean message: ``severity`` (``error`` / ``warning`` / ``info`` / ``trace``), its
    text, and its 1-based ``line`` when the answer gave a position (``None`` otherwise)."""

    severity: str
    text: str
    line: int | None = None


@dataclass(frozen=True)
class TacticCheck:
    """What Lean said about one tactic applied after the proof so far.

    Attributes:
        outcome: ``accepted`` (no error, no sorry), ``rejected`` or ``timeout``.
        goals: the open goals after the tactic, as Lean pretty-printed them (accepted only).
        complete: accepted and no goal is left (a proof without sorry).
        uses_sorry: Lean reported a ``sorry`` the tactic introduced (then rejected).
        reason: why it was rejected, in a few words (``""`` when accepted).
        messages: Lean's messages for this check, in order.
    """

    outcome: Outcome
    goals: tuple[str, ...] = ()
    complete: bool = False
    uses_sorry: bool = False
    reason: str = ""
    messages: tuple[LeanMessage, ...] = field(default_factory=tuple)


_SORRY_WARNING = re.compile(r"declaration uses ['`\u2018\u2019]?sorry", re.IGNORECASE)


def declares_sorry(messages: Sequence[LeanMessage]) -> bool:
    """True when a message says that the declaration uses ``sorry`` (any quoting, any line)."""
    return any(_SORRY_WARNING.search(m.text) for m in messages)


def mentions_sorry(text: str) -> bool:
    """True when ``text`` contains ``sorry``, ``admit`` or ``sorryAx`` as an identifier."""
    return _SORRY.search(text) is not None


def _field(obj: Mapping[str, Any], key: str, kind: type | tuple[type, ...], default: Any) -> Any:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, kind):
        raise ProtocolError(f"field {key!r} must be {kind}, got {type(value).__name__}")
    return value


def messages_of(answer: Mapping[str, Any]) -> tuple[LeanMessage, ...]:
    """The ``messages`` of an answer as :class:`LeanMessage` (``[]`` when absent).

    Raises:
        ProtocolError: a message without a string ``severity``.
    """
    out = []
    for m in _field(answer, "messages", list, []):
        if not isinstance(m, Mapping) or not isinstance(m.get("severity"), str):
            raise ProtocolError(
                f"a message must be an object with a string 'severity', got {m!r:.200}"
            )
        pos = m.get("pos")
        line = (
            pos.get("line")
            if isinstance(pos, Mapping) and isinstance(pos.get("line"), int)
            else None
        )
        data = m.get("data")
        out.append(LeanMessage(m["severity"], data if isinstance(data, str) else str(data), line))
    return tuple(out)


def _has_error(messages: Sequence[LeanMessage]) -> bool:
    return any(m.severity == "error" for m in messages)


def tactic_check(answer: Mapping[str, Any]) -> TacticCheck:
    """Classify the Lean REPL's answer to ``{"tactic": ..., "proofState": n}``.

    Rules, in order: an error answer ``{"message"}`` (no ``proofState``) rejects; a
    message of severity ``error`` rejects; a non-empty ``sorries`` rejects (the tactic
    used ``sorry``); no goal left is a complete proof only when ``proofStatus`` is absent
    (REPL versions before it existed) or its status word is ``Completed``, otherwise it
    rejects (``Error: kernel type check failed``, ``Incomplete: contains
    metavariable(s)``), and so does a "declaration uses sorry" warning
    (:func:`declares_sorry`); else the tactic is accepted with ``goals`` open.

    Raises:
        ProtocolError: the answer has neither shape.
    """
    if not isinstance(answer, Mapping):
        raise ProtocolError(f"a REPL answer must be a JSON object, got {type(answer).__name__}")
    if "proofState" not in answer:
        if isinstance(answer.get("message"), str):
            return TacticCheck(
                REJECTED, reason="Lean error", messages=(LeanMessage("error", answer["message"]),)
            )
        raise ProtocolError(
            f"a tactic answer needs 'proofState' or 'message', got keys {sorted(answer)}"
        )
    messages = messages_of(answer)
    goals = tuple(str(g) for g in _field(answer, "goals", list, []))
    if _has_error(messages):
        return TacticCheck(REJECTED, reason="Lean error", messages=messages)
    if _field(answer, "sorries", list, []):
        return TacticCheck(REJECTED, uses_sorry=True, reason="uses sorry", messages=messages)
    if not goals:
        status = _field(answer, "proofStatus", str, None)
        word = None if status is None else status.split(":", 1)[0].strip()
        if word not in (None, "Completed"):
            return TacticCheck(REJECTED, reason=f"proofStatus {status}", messages=messages)
        if declares_sorry(messages):
            return TacticCheck(REJECTED, uses_sorry=True, reason="uses sorry", messages=messages)
        return TacticCheck(ACCEPTED, goals=(), complete=True, messages=messages)
    return TacticCheck(ACCEPTED, goals=goals, messages=messages)


def command_check(
    response: Mapping[str, Any], *, probe_line: int, first_line: int = 1
) -> TacticCheck:
    """Classify a command answer (REPL ``{"cmd"}`` / Kimina ``response``) of a whole proof
    that ends with the probe line ``all_goals sorry`` at 1-based line ``probe_line``; the
    tactics start at line ``first_line``.

    The probe closes whatever goals the tactics leave, so an unfinished but correct proof
    has no error and one ``sorry`` per open goal *on the probe line*, each with its goal;
    a finished proof has no sorry at all (``all_goals`` over no goal does nothing).  So:
    a message of severity ``error`` rejects; a ``sorry`` on any other line (or without a
    position) rejects as the tactic's own; no sorry left is a complete proof unless some
    message (on any line) says the declaration uses ``sorry`` (then the proof's own:
    rejected); else the
    tactic is accepted with the probe's goals open.  The returned messages are the errors
    and those on the tactics' lines (``first_line`` to ``probe_line - 1``): the warning
    that the probe's ``sorry`` causes at the declaration is not the agent's.

    Raises:
        ProtocolError: the answer is a REPL error ``{"message"}`` or malformed.
    """
    if not isinstance(response, Mapping):
        raise ProtocolError(
            f"a command answer must be a JSON object, got {type(response).__name__}"
        )
    if "env" not in response and isinstance(response.get("message"), str):
        raise ProtocolError(f"the REPL refused the command: {response['message'][:300]}")
    every = messages_of(response)
    messages = tuple(
        m
        for m in every
        if m.severity == "error" or (m.line is not None and first_line <= m.line < probe_line)
    )
    if _has_error(messages):
        return TacticCheck(REJECTED, reason="Lean error", messages=messages)
    goals = []
    for s in _field(response, "sorries", list, []):
        if not isinstance(s, Mapping):
            raise ProtocolError(f"a sorry must be an object, got {s!r:.200}")
        pos = s.get("pos")
        line = pos.get("line") if isinstance(pos, Mapping) else None
        if line != probe_line:
            return TacticCheck(REJECTED, uses_sorry=True, reason="uses sorry", messages=messages)
        goals.append(str(s.get("goal", "")))
    if not goals and declares_sorry(every):
        # The probe closed nothing, so a sorry warning is the proof's own (e.g. admitGoal).
        return TacticCheck(REJECTED, uses_sorry=True, reason="uses sorry", messages=every)
    return TacticCheck(ACCEPTED, goals=tuple(goals), complete=not goals, messages=messages)


#: The axioms a finished proof may depend on: Lean's three standard axioms (what
#: ``#print axioms`` lists for proofs that use classical logic, quotients and
#: propositional extensionality).  ``sorryAx`` or an axiom the proof declared itself is
#: rejected.
ALLOWED_AXIOMS = frozenset({"propext", "Classical.choice", "Quot.sound"})


def _listing(text: str, name: str) -> tuple[str, ...] | None:
    """The axioms of Lean 4's ``#print axioms`` answer about ``name`` (``()`` for none), or
    ``None`` when ``text`` is not exactly that answer.

    Lean 4 (``src/Lean/Elab/Print.lean``) logs ``'<name>' depends on axioms: [a, b]`` or
    ``'<name>' does not depend on any axioms``.
    """
    quoted = re.escape(f"'{name}'")
    hit = re.fullmatch(quoted + r" depends on axioms: \[([^\]]*)\]", text.strip())
    if hit:
        return tuple(a.strip() for a in hit.group(1).split(",") if a.strip())
    if re.fullmatch(quoted + r" does not depend on any axioms", text.strip()):
        return ()
    return None


def axioms_of(messages: Sequence[LeanMessage], *, name: str, line: int) -> tuple[str, ...] | None:
    """The axioms ``#print axioms <name>`` listed, read only from the answer to the env's
    own command: the one message at 1-based ``line`` (the ``#print axioms`` line of the
    query, :func:`~.verifier.axioms_query`), of severity ``info``, saying exactly Lean's
    sentence about ``name``.  ``None`` (no verdict) when there is no such message, or more
    than one message on that line.  A message elsewhere (a tactic's ``Lean.logInfo``, a
    ``#print axioms`` of another constant the proof appended) is never read.
    """
    here = [m for m in messages if m.line == line]
    if len(here) != 1 or here[0].severity != "info":
        return None
    return _listing(here[0].text, name)


def axioms_verdict(response: Mapping[str, Any], *, name: str, line: int) -> TacticCheck | None:
    """Judge the answer to a finished proof followed by ``#print axioms <name>`` on 1-based
    line ``line`` of the command (:func:`axioms_of`).

    Returns ``None`` when the proof depends only on :data:`ALLOWED_AXIOMS`; else a
    rejected :class:`TacticCheck` (``uses_sorry`` when ``sorryAx`` is among them; also
    when the answer has an error, or no listing for ``name`` on ``line``).

    Raises:
        ProtocolError: the answer is not a command answer.
    """
    if not isinstance(response, Mapping):
        raise ProtocolError(
            f"a command answer must be a JSON object, got {type(response).__name__}"
        )
    messages = messages_of(response)
    if _has_error(messages):
        return TacticCheck(REJECTED, reason="Lean error checking axioms", messages=messages)
    axioms = axioms_of(messages, name=name, line=line)
    if axioms is None:
        return TacticCheck(
            REJECTED,
            reason=f"#print axioms {name} gave no answer to check on line {line}",
            messages=messages,
        )
    extra = sorted(set(axioms) - ALLOWED_AXIOMS)
    if not extra:
        return None
    return TacticCheck(
        REJECTED,
        uses_sorry="sorryAx" in extra,
        reason=f"the proof depends on axiom(s) {', '.join(extra)}",
        messages=messages,
    )


def goal_signature(goal: str) -> tuple[tuple[str, ...], str]:
    """A goal up to hypothesis names, order and repeats: ``(sorted hypothesis types, target)``.

    Lean pretty-prints a goal as an optional ``case <tag>`` line, hypothesis lines
    ``names : type`` and the target ``⊢ type``; continuation lines are indented.  Two
    goals with the same signature are the same proof obligation: ``have h : P`` when a
    hypothesis of type ``P`` exists, a renaming or a reordering changes nothing.
    """
    entries: list[str] = []
    for line in goal.split("\n"):
        if entries and line[:1].isspace():
            entries[-1] += " " + line.strip()
        elif line.strip():
            entries.append(line.strip())
    hyps: set[str] = set()
    target = ""
    for entry in entries:
        if entry.startswith("⊢"):
            target = entry[1:].strip()
        elif entry.startswith("case ") and " : " not in entry:
            continue
        else:
            _, sep, typ = entry.partition(" : ")
            hyps.add(typ.strip() if sep else entry)
    return tuple(sorted(hyps)), target


def state_signature(goals: Sequence[str]) -> tuple[tuple[tuple[str, ...], str], ...]:
    """The proof state up to names and goal order: the sorted goal signatures."""
    return tuple(sorted(goal_signature(g) for g in goals))
