"""The Lean env's observation text (grammar: ``docs/envs/lean.md``, "Observation").

Sections, in order, each present only when it has content::

    Theorem <name>: <n> tactics checked, <k> accepted.
    Problem: <informal statement>
    Statement:
    <formal statement>
    Proof so far (last <P> of <N> lines):
      1 | <tactic line>
    Recent tactics:
      ✓ <tactic> (progress | no change | proof complete)
      ✗ <tactic> (rejected: <reason> | timed out)
    Lean messages:
      <severity>: <text>
    Open goals (<g>):          | Goals: none, the proof is complete. | Goal (from the data set):
      [1] <goal>
    Verifier error: <one line>

Only checked tactics change it (an invalid action leaves it as it was), and it holds
no timing or counter of invalid actions, so equal histories give equal text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .protocol import LeanMessage

__all__ = ["LogEntry", "render_observation"]


@dataclass(frozen=True)
class LogEntry:
    """One checked tactic in the recent-tactics log: ✓ (accepted) or ✗, and a note."""

    accepted: bool
    tactic: str
    note: str


def _one_line(text: str, limit: int) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: max(0, limit - 1)] + "…"


def _indent(text: str, prefix: str) -> str:
    lines = text.split("\n")
    return "\n".join([prefix + lines[0]] + [" " * len(prefix) + line for line in lines[1:]])


def render_observation(
    *,
    name: str,
    informal: str,
    statement: str,
    proof: Sequence[str],
    checked: int,
    accepted: int,
    log: Sequence[LogEntry],
    messages: Sequence[LeanMessage],
    goals: Sequence[str] | None,
    data_goal: str | None,
    complete: bool,
    error: str | None,
    proof_lines: int,
    message_chars: int,
    goals_shown: int,
) -> str:
    """The observation (module docstring).

    ``goals`` is ``None`` before the first check, when ``data_goal`` (the data set's
    recorded initial goal, if any) is shown instead; ``messages`` are the last check's,
    cut to ``message_chars`` characters each.
    """
    parts = [
        f"Theorem {name}: {checked} tactic{'s' if checked != 1 else ''} checked, {accepted} accepted."
    ]
    if informal:
        parts.append(f"Problem: {informal}")
    parts.append("Statement:\n" + statement.rstrip())
    lines = [ln for t in proof for ln in t.split("\n")]
    if lines:
        shown = lines[-proof_lines:]
        start = len(lines) - len(shown) + 1
        head = (
            f"Proof so far (last {len(shown)} of {len(lines)} lines):"
            if len(shown) < len(lines)
            else "Proof so far:"
        )
        parts.append(
            head + "\n" + "\n".join(f"{start + i:3d} | {ln}" for i, ln in enumerate(shown))
        )
    else:
        parts.append("Proof so far: (empty)")
    if log:
        parts.append(
            "Recent tactics:\n"
            + "\n".join(
                f"  {'✓' if e.accepted else '✗'} {_one_line(e.tactic, 80)} ({e.note})" for e in log
            )
        )
    if messages:
        parts.append(
            "Lean messages:\n"
            + "\n".join(
                _indent(_one_line(m.text, message_chars), f"  {m.severity}: ") for m in messages
            )
        )
    if complete:
        parts.append("Goals: none, the proof is complete.")
    elif goals is not None:
        shown_goals = list(goals)[:goals_shown]
        more = f" (first {len(shown_goals)} shown)" if len(goals) > len(shown_goals) else ""
        parts.append(
            f"Open goals ({len(goals)}){more}:\n"
            + "\n".join(_indent(g, f"  [{i}] ") for i, g in enumerate(shown_goals, 1))
        )
    elif data_goal:
        parts.append("Goal (from the data set, before any check):\n" + _indent(data_goal, "  "))
    if error:
        parts.append(f"Verifier error: {error}")
    return "\n\n".join(parts)
