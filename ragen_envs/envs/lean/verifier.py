"""The verifier interface of the Lean env and the choice of back-end (spec: ``docs/envs/lean.md``).

A :class:`Verifier` answers two questions about a :class:`~.theorems.Theorem`:

* :meth:`Verifier.open_goals` — the goals of the bare statement (as this Lean prints them);
* :meth:`Verifier.check` — what one more tactic does after the tactics accepted so far
  (a :class:`~.protocol.TacticCheck`).

It is stateless towards the env (the proof so far is passed each time), so a back-end
may cache, restart or replay as it likes.  Every failure that is not Lean's verdict
about the tactic (unreachable server, missing executable, crashed or silent REPL,
answers in an unknown shape) is a :class:`VerifierError` with a one-line message naming
the URL or executable; the env ends the episode with status ``env_error``.

Back-ends, chosen by the ``verifier`` config field (or the ``RAGEN_LEAN_VERIFIER``
environment variable when the field is ``null``), see :func:`parse_spec`:

``http://host:port`` / ``https://...``
    the Kimina Lean Server (:mod:`.kimina`; needs ``httpx``, the ``lean`` extra);
``repl:<command>``
    the Lean REPL as a subprocess (:mod:`.repl`; ``repl:`` alone runs ``lake exe repl``);
``replay:<file>``
    answers recorded in a JSONL file (:mod:`.replay`), for tests and offline runs.

When a tactic completes the proof, the live back-ends (Kimina, REPL) send one more
command, the finished proof followed by ``#print axioms <name>`` (:func:`axioms_query`),
and reject the tactic unless only Lean's standard axioms appear
(:func:`~.protocol.axioms_verdict`), read only from Lean's answer on that ``#print``
line about that name.  A replay has only the answers it
recorded, so it does not check axioms.
"""

from __future__ import annotations

import os
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from .protocol import TacticCheck
from .theorems import Theorem

__all__ = [
    "DEFAULT_SPEC",
    "ENV_VAR",
    "PROBE",
    "VerifierError",
    "Verifier",
    "VerifierSpec",
    "axioms_query",
    "build_proof",
    "declaration_name",
    "parse_spec",
    "resolve_spec",
]

#: Where the Kimina Lean Server listens by default (its ``LEAN_SERVER_PORT`` default, and RAGEN's).
DEFAULT_SPEC = "http://127.0.0.1:8000"

#: The environment variable read when the config's ``verifier`` is ``null``.
ENV_VAR = "RAGEN_LEAN_VERIFIER"

#: The probe line closing whatever goals remain in a whole-proof check (see
#: :func:`~.protocol.command_check`).
PROBE = "all_goals sorry"

#: Default command of the REPL back-end (leanprover-community/repl README: "Run using lake exe repl").
DEFAULT_REPL_COMMAND = ("lake", "exe", "repl")


class VerifierError(RuntimeError):
    """The verifier could not give Lean's verdict (the message is one line)."""

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


@dataclass(frozen=True)
class VerifierSpec:
    """A parsed ``verifier`` value: ``kind`` (``kimina`` / ``repl`` / ``replay``) and its target
    (the base URL, the command as an argument list, or the file path)."""

    kind: str
    url: str = ""
    command: tuple[str, ...] = ()
    path: str = ""

    def describe(self) -> str:
        """The spec as the config would spell it."""
        if self.kind == "kimina":
            return self.url
        if self.kind == "repl":
            return "repl:" + shlex.join(self.command)
        return "replay:" + self.path


def parse_spec(spec: str) -> VerifierSpec:
    """Parse a verifier spec (module docstring).

    Raises:
        ValueError: an unknown form, an empty command or path (the message says which).
    """
    text = spec.strip()
    if text.startswith(("http://", "https://")):
        return VerifierSpec("kimina", url=text.rstrip("/"))
    if text.startswith("repl:"):
        try:
            command = tuple(shlex.split(text[len("repl:") :]))
        except ValueError as exc:
            raise ValueError(f"cannot split the REPL command {text!r}: {exc}") from None
        return VerifierSpec("repl", command=command or DEFAULT_REPL_COMMAND)
    if text.startswith("replay:"):
        path = text[len("replay:") :].strip()
        if not path:
            raise ValueError("replay: needs a file, e.g. replay:answers.jsonl")
        return VerifierSpec("replay", path=os.path.expanduser(path))
    raise ValueError(
        f"unknown verifier {spec!r}: use http(s)://host:port (Kimina Lean Server), "
        "repl:<command> (Lean REPL, e.g. 'repl:lake exe repl') or replay:<file>"
    )


def resolve_spec(configured: str | None) -> VerifierSpec:
    """The config's spec, else ``$RAGEN_LEAN_VERIFIER``, else :data:`DEFAULT_SPEC`.

    Raises:
        ValueError: the spec does not parse (naming the environment variable when it came from there).
    """
    if configured is not None:
        return parse_spec(configured)
    from_env = os.environ.get(ENV_VAR)
    if not from_env:
        return parse_spec(DEFAULT_SPEC)
    try:
        return parse_spec(from_env)
    except ValueError as exc:
        raise ValueError(f"${ENV_VAR}: {exc}") from None


def indent_tactic(tactic: str) -> str:
    """Every line of ``tactic`` indented by two spaces (the tactic block's column), newline-terminated."""
    return "".join("  " + line + "\n" for line in tactic.split("\n"))


def build_proof(theorem: Theorem, tactics: Sequence[str], *, probe: bool) -> tuple[str, int]:
    """The Lean text header + statement + tactics (+ the probe line), and the probe's 1-based line.

    The returned line number is that of the probe (or of the line after the last tactic
    when ``probe`` is false).
    """
    body = theorem.header + theorem.statement + "".join(indent_tactic(t) for t in tactics)
    line = body.count("\n") + 1
    return (body + "  " + PROBE + "\n" if probe else body), line


_DECL = re.compile(
    r"^[ \t]*(?:@\[[^\]]*\][ \t]*)?(?:(?:private|protected|noncomputable)[ \t]+)*"
    r"(?:theorem|lemma|def)[ \t]+([^\s:({\[]+)",
    re.MULTILINE,
)


def declaration_name(theorem: Theorem) -> str | None:
    """The name the statement declares (``theorem foo ...`` -> ``foo``), ``None`` for an
    ``example`` or a statement we cannot read."""
    m = _DECL.search(theorem.statement)
    return m.group(1) if m else None


def axioms_query(
    theorem: Theorem, tactics: Sequence[str], *, header: bool = True
) -> tuple[str, str, int] | None:
    """The finished proof (header unless ``header=False``, statement, tactics) followed by
    ``#print axioms <name>``: ``(text, name, line)`` with the 1-based line of the
    ``#print`` in ``text`` (where Lean's answer must be,
    :func:`~.protocol.axioms_verdict`); ``None`` when the statement declares no name
    (then only the sorry checks apply)."""
    name = declaration_name(theorem)
    if name is None:
        return None
    body, _ = build_proof(theorem, tactics, probe=False)
    if not header:
        body = body[len(theorem.header) :]
    text = f"{body}\n#print axioms {name}\n"
    return text, name, text.count("\n")


class Verifier:
    """The back-end interface (see the module docstring).  Subclasses implement
    :meth:`open_goals` and :meth:`check`, and may override :meth:`close` and :meth:`known_proof`."""

    #: Short name of the back-end (``kimina``, ``repl``, ``replay``).
    kind = ""

    def open_goals(self, theorem: Theorem) -> tuple[str, ...]:  # pragma: no cover - abstract
        """The goals of the statement before any tactic.

        Raises:
            VerifierError: the back-end failed, or the statement does not elaborate.
        """
        raise NotImplementedError

    def check(
        self, theorem: Theorem, proof: Sequence[str], tactic: str
    ) -> TacticCheck:  # pragma: no cover
        """Lean's verdict on ``tactic`` after the accepted tactics ``proof``.

        Raises:
            VerifierError: the back-end failed (not Lean's verdict on the tactic).
        """
        raise NotImplementedError

    def known_proof(self, theorem: Theorem) -> tuple[str, ...] | None:
        """A complete proof this back-end knows (a replay's recording), else ``None``."""
        return None

    @property
    def attempts(self) -> int:
        """Tries the last call needed (1 when the first try answered)."""
        return getattr(self, "_attempts", 1)

    def close(self) -> None:
        """Release connections and processes (idempotent)."""
