"""What a tactic may not contain: Lean command and meta-programming tokens (spec: ``docs/envs/lean.md``).

A tactic is pasted into a Lean file under the statement's ``by`` (the Kimina back-end
checks the whole file; the REPL back-end also checks the finished proof as a command).
A line that Lean does not parse as a tactic ends the ``by`` block and is read as a
*command*, so a tactic can carry commands: ``#print axioms Nat.add`` prints an axiom
listing about another constant, ``#exit`` stops Lean before the env's own
``#print axioms`` (the axioms check, :func:`~.protocol.axioms_verdict`, would have nothing
to read).  Meta-programming inside a tactic (``run_tac``, ``elab``, ``Lean.addDecl``,
``Lean.logInfo``) can declare axioms, close goals without a proof and log messages shaped
like Lean's.  ``native_decide`` (and ``decide +native``) proves by running compiled code,
trusting the compiler: its proof depends on the axiom ``Lean.ofReduceBool`` (Lean 4's
``Lean.ofReduceBool`` docstring; Mathlib does not accept it), which no miniF2F proof needs.

So a tactic containing any of these is refused before Lean sees it (an invalid action:
the format penalty, nothing sent), :func:`refused_token`:

* a hash command: ``#`` followed by a letter (``#print``, ``#exit``, ``#eval``,
  ``#check``, ``#reduce``, …).  Mathlib's ``#s`` / ``#α`` cardinality notations are
  refused with them (write ``s.card``); ``#[…]`` array literals are allowed;
* a word of :data:`REFUSED_WORDS` as a whole identifier (command keywords, meta-programming
  entry points, ``native_decide``), or any name in the ``Lean`` namespace (``Lean.…``,
  ``open Lean``).

Comments and string literals are not exempt (a refused word in a comment is refused:
simpler to state and to check than Lean's lexer).  The axioms check stays as the second
line of defence, bound to the theorem's own name and to the env's own command.
"""

from __future__ import annotations

import re

__all__ = ["REFUSED_WORDS", "refused_token"]

#: Whole identifiers a tactic may not contain (module docstring).
REFUSED_WORDS = frozenset(
    {
        # commands that declare, configure or run code
        "axiom",
        "opaque",
        "theorem",
        "lemma",
        "def",
        "example",
        "instance",
        "abbrev",
        "structure",
        "inductive",
        "namespace",
        "section",
        "set_option",
        "initialize",
        "builtin_initialize",
        "unsafe",
        "implemented_by",
        "extern",
        # meta-programming entry points
        "run_cmd",
        "run_tac",
        "run_elab",
        "run_meta",
        "elab",
        "elab_rules",
        "macro",
        "macro_rules",
        "syntax",
        "declare_syntax_cat",
        "notation",
        "infix",
        "infixl",
        "infixr",
        "postfix",
        "addDecl",
        "addAndCompile",
        "logInfo",
        "logInfoAt",
        "logWarning",
        "logError",
        # proofs that trust the compiler (axiom Lean.ofReduceBool / Lean.trustCompiler)
        "native_decide",
        "native",
        "ofReduceBool",
        "ofReduceNat",
        "trustCompiler",
    }
)

#: An identifier character of Lean (letters, digits, ``_``, ``'``, ``!``, ``?``, subscripts).
_ID = r"\w'!?"

_HASH_COMMAND = re.compile(r"#[^\W\d]")
_WORD = re.compile(rf"(?<![{_ID}.])([^\W\d][{_ID}]*)")
_LEAN_NAMESPACE = re.compile(rf"(?<![{_ID}])Lean(?![{_ID}])")


def refused_token(text: str) -> str | None:
    """The first command or meta-programming token in ``text`` (module docstring), else ``None``.

    Example: ``refused_token("native_decide")`` -> ``"native_decide"``;
    ``refused_token("norm_num [Nat.add_comm]")`` -> ``None``.
    """
    hits = []
    m = _HASH_COMMAND.search(text)
    if m:
        end = m.end()
        while end < len(text) and (text[end].isalnum() or text[end] == "_"):
            end += 1
        hits.append((m.start(), text[m.start() : end]))
    m = _LEAN_NAMESPACE.search(text)
    if m:
        hits.append((m.start(), "Lean"))
    for w in _WORD.finditer(text):
        if w.group(1) in REFUSED_WORDS:
            hits.append((w.start(), w.group(1)))
            break
    return min(hits)[1] if hits else None
